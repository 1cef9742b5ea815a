#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace duet {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(Sampler, GreedyPicksTheArgmax) {
  Sampler s(SamplingParams::greedy());
  auto l = logits_of({0.1f, 3.0f, -1.0f, 2.9f});
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
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
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
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
