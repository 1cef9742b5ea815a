// OpenAI's logit_bias in the sampler: a bias of -100 bans a token, 100
// forces it (or one of several forced, by their own logits), anything
// between shifts its logit; ids outside the row are ignored.
#include <gtest/gtest.h>

#include <vector>

#include "engine/sampler.h"

namespace duet {
namespace {

std::vector<float> row() { return {1.0f, 5.0f, 2.0f, 4.0f, 3.0f, 0.0f}; }

int32_t draw(SamplingParams p, std::vector<float> logits) {
  Sampler s(p);
  return s.sample(logits.data(), static_cast<int32_t>(logits.size()), {});
}

TEST(LogitBias, MinusHundredBansTheGreedyChoice) {
  SamplingParams p = SamplingParams::greedy();
  EXPECT_EQ(draw(p, row()), 1);
  p.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(draw(p, row()), 3);
  p.logit_bias = {{1, -100.0f}, {3, -100.0f}, {4, -100.0f}};
  EXPECT_EQ(draw(p, row()), 2);
}

TEST(LogitBias, HundredForcesAToken) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.logit_bias = {{5, 100.0f}};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    EXPECT_EQ(draw(p, row()), 5);
  }
  // Two forced tokens: only they are drawn.
  p.logit_bias = {{0, 100.0f}, {5, 100.0f}};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    const int32_t t = draw(p, row());
    EXPECT_TRUE(t == 0 || t == 5) << t;
  }
}

TEST(LogitBias, ModerateBiasShiftsTheLogit) {
  SamplingParams p = SamplingParams::greedy();
  p.logit_bias = {{2, 3.5f}};  // 2 + 3.5 > 5
  EXPECT_EQ(draw(p, row()), 2);
  p.logit_bias = {{2, 2.5f}};  // 4.5 < 5
  EXPECT_EQ(draw(p, row()), 1);
  p.logit_bias = {{99, 100.0f}, {-1, -100.0f}};  // outside the row: ignored
  EXPECT_EQ(draw(p, row()), 1);
}

TEST(LogitBias, TheDistributionHonoursItToo) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.logit_bias = {{1, -100.0f}};
  Sampler s(p);
  std::vector<float> logits = row();
  TokenDist d;
  s.distribution(logits.data(), static_cast<int32_t>(logits.size()), {}, d);
  EXPECT_EQ(prob_of(d, 1), 0.0);
  EXPECT_GT(prob_of(d, 3), 0.0);
}

}  // namespace
}  // namespace duet
