// The step loop on real weights (stories260K).
#include "engine/engine.h"

#include <gtest/gtest.h>

#include "engine/stories_model.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::load;
using testing::load_stories;
using testing::stories_path;

struct Collected {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
};

TokenCallback collect(Collected& c) {
  return [&c](const TokenEvent& ev) {
    if (ev.token >= 0) c.tokens.push_back(ev.token);
    if (ev.finished) {
      c.reason = ev.reason;
      c.error = ev.error;
    }
  };
}

RequestParams greedy(int32_t n) {
  RequestParams p;
  p.sampling = SamplingParams::greedy();
  p.max_tokens = n;
  return p;
}

TEST(Engine, GreedyStoryMatchesTheKnownText) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineConfig cfg;
  cfg.n_threads = 2;
  Engine engine(*model, cfg);
  Collected c;
  const auto prompt = model->tokenizer().encode("Once upon a time", true);
  ASSERT_TRUE(engine.submit(prompt, greedy(40), collect(c)).ok());
  ASSERT_TRUE(engine.run_until_idle().ok());
  EXPECT_EQ(c.reason, FinishReason::kLength);
  ASSERT_EQ(c.tokens.size(), 40u);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), c.tokens.begin(), c.tokens.end());
  // karpathy's llama2.c prints this for stories260K at temperature 0.
  EXPECT_EQ(model->tokenizer().decode(all).rfind("Once upon a time, there was a little girl named Lily.", 0), 0u)
      << model->tokenizer().decode(all);
  EXPECT_EQ(engine.cache().pool().n_used(), 0);
}

TEST(Engine, WarmUpLeavesNothingARequestOrTheMetricsSee) {
  // The one-token pass duet serve and duet run make before their first
  // request: the same counters and histograms as a fresh engine's, no
  // block held, and the next request's tokens as without it.
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineConfig cfg;
  cfg.n_threads = 2;
  Engine warm(*model, cfg), cold(*model, cfg);
  ASSERT_TRUE(warm.warm_up(model->tokenizer().bos_id()).ok());
  const EngineMetrics a = warm.metrics(), b = cold.metrics();
  EXPECT_EQ(a.finished_by_reason, b.finished_by_reason);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.prompt_tokens_computed, b.prompt_tokens_computed);
  EXPECT_EQ(a.ttft.count(), 0);
  EXPECT_EQ(a.itl.count(), 0);
  EXPECT_EQ(a.generated_tokens_per_second, 0.0);
  EXPECT_EQ(a.kv.used, 0);
  EXPECT_EQ(a.kv.cached, 0);
  EXPECT_EQ(warm.cache().pool().n_used(), 0);
  const auto prompt = model->tokenizer().encode("Once upon a time", true);
  Collected cw, cc;
  RequestParams sampled = greedy(30);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 7;
  for (const RequestParams& p : {greedy(30), sampled}) {
    cw = {};
    cc = {};
    ASSERT_TRUE(warm.submit(prompt, p, collect(cw)).ok());
    ASSERT_TRUE(warm.run_until_idle().ok());
    ASSERT_TRUE(cold.submit(prompt, p, collect(cc)).ok());
    ASSERT_TRUE(cold.run_until_idle().ok());
    EXPECT_EQ(cw.tokens, cc.tokens);
    EXPECT_EQ(cw.tokens.size(), 30u);
  }
}

TEST(Engine, ConcurrentRequestsGiveWhatEachGivesAlone) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  const std::vector<std::string> prompts = {"Once upon a time", "The cat", "Lily and Ben went",
                                            "One day, a big dog"};
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    EngineConfig cfg;
    cfg.n_threads = 2;
    Engine e(*model, cfg);
    Collected c;
    ASSERT_TRUE(e.submit(model->tokenizer().encode(p, true), greedy(30), collect(c)).ok());
    ASSERT_TRUE(e.run_until_idle().ok());
    alone.push_back(c.tokens);
  }
  EngineConfig cfg;
  cfg.n_threads = 2;
  cfg.scheduler.max_batch_tokens = 8;  // forces chunked prefill beside decodes
  Engine e(*model, cfg);
  std::vector<Collected> together(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(e.submit(model->tokenizer().encode(prompts[i], true), greedy(30), collect(together[i])).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i]) << prompts[i];
}

TEST(Engine, TinyKvPoolPreemptsAndStillCompletesCorrectly) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  std::vector<int32_t> expected;
  {
    EngineConfig cfg;
    Engine e(*model, cfg);
    Collected c;
    ASSERT_TRUE(e.submit(model->tokenizer().encode("Once upon a time", true), greedy(60), collect(c)).ok());
    ASSERT_TRUE(e.run_until_idle().ok());
    expected = c.tokens;
  }
  EngineConfig cfg;
  cfg.n_kv_blocks = 6;  // 96 slots for three 65-token sequences
  Engine e(*model, cfg);
  std::vector<Collected> cs(3);
  for (auto& c : cs)
    ASSERT_TRUE(e.submit(model->tokenizer().encode("Once upon a time", true), greedy(60), collect(c)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  for (const auto& c : cs) EXPECT_EQ(c.tokens, expected);
  EXPECT_EQ(e.cache().pool().n_used(), 0);
}

TEST(Engine, PromptLongerThanContextIsRejected) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineConfig cfg;
  cfg.ctx = 8;
  Engine e(*model, cfg);
  Collected c;
  // The prompt must leave room for at least one generated token.
  for (size_t n : {8, 9}) {
    auto r = e.submit(std::vector<int32_t>(n, 5), greedy(4), collect(c));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("the context of 8 tokens must leave room"), std::string::npos);
    EXPECT_EQ(r.error().code, kContextLengthExceeded);
  }
  EXPECT_TRUE(e.submit(std::vector<int32_t>(7, 5), greedy(4), collect(c)).ok());
}

TEST(Engine, StopsWhenTheContextIsFull) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineConfig cfg;
  cfg.ctx = 20;
  Engine e(*model, cfg);
  Collected c;
  RequestParams p = greedy(100);
  p.ignore_eos = true;
  ASSERT_TRUE(e.submit(std::vector<int32_t>{1, 403, 407}, p, collect(c)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  EXPECT_EQ(c.reason, FinishReason::kContext);
  EXPECT_EQ(c.tokens.size(), 17u);
}

TEST(Engine, CancelFreesEverything) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineConfig cfg;
  Engine e(*model, cfg);
  Collected c;
  auto id = e.submit(model->tokenizer().encode("Once upon a time", true), greedy(100), collect(c));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(e.step().ok());
  ASSERT_TRUE(e.step().ok());
  EXPECT_GT(e.cache().pool().n_used(), 0);
  e.cancel(*id);
  EXPECT_EQ(c.reason, FinishReason::kCancelled);
  EXPECT_TRUE(e.idle());
  EXPECT_EQ(e.cache().pool().n_used(), 0);
}

}  // namespace
}  // namespace duet
