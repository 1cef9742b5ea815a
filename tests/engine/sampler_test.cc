#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace duet {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

// Temperature sampling with no cut (top-k, top-p and min-p off).
SamplingParams uncut(float temperature, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// The distribution by the definition: every candidate sorted, then the cuts.
TokenDist fully_sorted(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({logits[i] / p.temperature, static_cast<int32_t>(i)});
  std::sort(c.begin(), c.end(), [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  TokenDist d;
  double total = 0;
  for (auto [l, id] : c) total += std::exp(static_cast<double>(l - c[0].first));
  for (auto [l, id] : c) d.push_back({id, std::exp(static_cast<double>(l - c[0].first)) / total});
  size_t keep = d.size();
  double cum = 0;
  for (size_t i = 0; p.top_p < 1.0f && i < d.size(); ++i)
    if ((cum += d[i].p) >= p.top_p) {
      keep = i + 1;
      break;
    }
  size_t i = 1;
  while (p.min_p > 0.0f && i < keep && d[i].p >= d[0].p * p.min_p) ++i;
  if (p.min_p > 0.0f) keep = i;
  d.resize(keep);
  double mass = 0;
  for (auto& t : d) mass += t.p;
  for (auto& t : d) t.p /= mass;
  return d;
}

TEST(Sampler, CutsDeepIntoALargeVocabularyMatchAFullSort) {
  // 5000 candidates: only the head is sorted up front, so cuts that reach
  // past it must sort the rest and still agree with the definition.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(5000);
  for (float& l : logits) l = nd(rng);
  for (auto [top_p, min_p] : {std::pair{0.95f, 0.0f}, {0.3f, 0.0f}, {1.0f, 0.001f}, {0.99f, 0.05f}}) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 0;
    p.top_p = top_p;
    p.min_p = min_p;
    Sampler s(p);
    auto l = logits;
    TokenDist got;
    s.distribution(l.data(), static_cast<int32_t>(l.size()), {}, got);
    const TokenDist want = fully_sorted(logits, p);
    ASSERT_EQ(got.size(), want.size()) << top_p << " " << min_p;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].id, want[i].id) << i;
      ASSERT_NEAR(got[i].p, want[i].p, 1e-12) << i;
    }
  }
}

TEST(Sampler, WithoutCutsEveryCandidateIsKeptLikeliestFirst) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(3000);
  for (float& l : logits) l = nd(rng);
  const SamplingParams p = uncut(1.0f);
  Sampler s(p);
  auto l = logits;
  TokenDist got;
  s.distribution(l.data(), static_cast<int32_t>(l.size()), {}, got);
  const TokenDist want = fully_sorted(logits, p);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(got[i].id, want[i].id) << i;
  std::map<int32_t, double> by_id;
  for (const TokenProb& t : want) by_id[t.id] = t.p;
  double sum = 0;
  for (const TokenProb& t : got) {
    ASSERT_NEAR(t.p, by_id.at(t.id), 1e-12);
    by_id.erase(t.id);  // each id once
    sum += t.p;
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
}

TEST(Sampler, SampleDrawsWhatDrawingFromTheDistributionDraws) {
  // sample() without cuts walks the list distribution() would build without
  // building it. Flat logits put most draws past the sorted head.
  for (float spread : {4.0f, 0.01f}) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, spread);
    std::vector<float> logits(5000);
    for (float& l : logits) l = nd(rng);
    const SamplingParams p = uncut(0.7f, 77);
    Sampler fast(p), slow(p);
    int past_head = 0;
    for (int i = 0; i < 300; ++i) {
      auto a = logits, b = logits;
      TokenDist d;
      slow.distribution(b.data(), static_cast<int32_t>(b.size()), {}, d);
      const int32_t want = slow.draw(d);
      ASSERT_EQ(fast.sample(a.data(), static_cast<int32_t>(a.size()), {}), want) << "draw " << i;
      const auto at = std::find_if(d.begin(), d.end(), [&](const TokenProb& t) { return t.id == want; });
      past_head += at - d.begin() >= 64;
    }
    if (spread < 1.0f) {
      EXPECT_GT(past_head, 200);  // the tail's order was exercised
    }
  }
}

TEST(Sampler, GreedyPicksTheArgmax) {
  Sampler s(SamplingParams::greedy());
  auto l = logits_of({0.1f, 3.0f, -1.0f, 2.9f});
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p = uncut(1.0f, 1234);
  Sampler a(p), b(p);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 50; ++i) {
    auto la = logits_of({0.0f, 0.5f, 1.0f, 0.2f, -0.3f});
    auto lb = la;
    ta.push_back(a.sample(la.data(), 5, {}));
    tb.push_back(b.sample(lb.data(), 5, {}));
  }
  EXPECT_EQ(ta, tb);
  p.seed = 99;
  Sampler c(p);
  std::vector<int32_t> tc;
  for (int i = 0; i < 50; ++i) {
    auto l = logits_of({0.0f, 0.5f, 1.0f, 0.2f, -0.3f});
    tc.push_back(c.sample(l.data(), 5, {}));
  }
  EXPECT_NE(ta, tc);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    Sampler s(p);
    auto l = logits_of({1.0f, 1.5f, 1.4f});
    EXPECT_EQ(s.sample(l.data(), 3, {}), 1);
  }
}

TEST(Sampler, TemperatureOneMatchesSoftmaxFrequencies) {
  SamplingParams p = uncut(1.0f, 7);
  Sampler s(p);
  const std::vector<float> base = {0.0f, 1.0f, 2.0f};
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    ++counts[s.sample(l.data(), 3, {})];
  }
  for (int t = 0; t < 3; ++t) {
    const double expected = std::exp(static_cast<double>(base[t])) / z;
    // 5 standard deviations of a binomial proportion: false alarms ~1e-6.
    const double sd = std::sqrt(expected * (1 - expected) / n);
    EXPECT_NEAR(counts[t] / static_cast<double>(n), expected, 5 * sd) << "token " << t;
  }
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.top_p = 0.5f;  // probs ~ {0.665, 0.245, 0.09}: only token 2 survives
  for (uint64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    Sampler s(p);
    auto l = logits_of({0.0f, 1.0f, 2.0f});
    EXPECT_EQ(s.sample(l.data(), 3, {}), 2);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // token 0 has e^-3 of the top's probability: dropped
  for (uint64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    Sampler s(p);
    auto l = logits_of({0.0f, 3.0f, 3.0f});
    EXPECT_NE(s.sample(l.data(), 3, {}), 0);
  }
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = SamplingParams::greedy();
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  auto l = logits_of({4.0f, 3.0f, -1.0f});
  // token 0 seen (4 -> 2) and token 2 seen (-1 -> -2): token 1 wins.
  EXPECT_EQ(s.sample(l.data(), 3, std::vector<int32_t>{0, 2, 0}), 1);
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[2], -2.0f);
}

TEST(Sampler, FrequencyAndPresencePenaltiesSubtract) {
  SamplingParams p = SamplingParams::greedy();
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.0f;
  Sampler s(p);
  auto l = logits_of({3.0f, 2.5f});
  s.sample(l.data(), 2, std::vector<int32_t>{0, 0});
  EXPECT_FLOAT_EQ(l[0], 3.0f - 2 * 0.5f - 1.0f);
  EXPECT_FLOAT_EQ(l[1], 2.5f);
}

}  // namespace
}  // namespace duet
