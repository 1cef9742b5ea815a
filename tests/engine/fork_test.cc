// n choices (RequestParams::n) on stories260K: the prompt is prefilled once
// and its blocks shared, the last partial block copied when the choices
// write past it; greedy choices agree with each other and with n = 1,
// seeded ones differ and repeat, and cancelling ends every choice.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/engine.h"
#include "engine/stories_model.h"

namespace duet {
namespace {

using testing::load_stories;

struct Choices {
  std::map<int32_t, std::vector<int32_t>> tokens;  // by choice
  std::map<int32_t, FinishReason> reasons;
  int32_t request_ended = 0;
  bool ended_last = false;  // the request_ended event was the last one
  std::set<int64_t> request_ids;
};

TokenCallback collect(Choices& c) {
  return [&c](const TokenEvent& ev) {
    c.request_ids.insert(ev.request_id);
    if (ev.token >= 0) c.tokens[ev.choice].push_back(ev.token);
    if (ev.finished) c.reasons[ev.choice] = ev.reason;
    c.ended_last = ev.request_ended;
    c.request_ended += ev.request_ended;
  };
}

// 40 tokens: two full blocks and a partial third.
std::vector<int32_t> prompt_of(const Model& m) {
  std::vector<int32_t> p = m.tokenizer().encode("Once upon a time, there was a little dog who liked to run", true);
  while (p.size() < 40) p.push_back(p[p.size() % 10 + 1]);
  p.resize(40);
  return p;
}

RequestParams params(int32_t n, float temperature, int32_t max_tokens) {
  RequestParams p;
  p.sampling.temperature = temperature;
  p.sampling.top_k = 0;
  p.sampling.top_p = 1.0f;
  p.sampling.min_p = 0.0f;
  p.sampling.seed = 7;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.n = n;
  return p;
}

EngineConfig config() {
  EngineConfig c;
  c.n_threads = 1;  // stories260K is too small to share out
  return c;
}

Choices run(Model& model, const RequestParams& p, EngineMetrics* metrics = nullptr) {
  Engine engine(model, config());
  Choices c;
  auto id = engine.submit(prompt_of(model), p, collect(c));
  EXPECT_TRUE(id.ok());
  EXPECT_TRUE(engine.run_until_idle().ok());
  EXPECT_EQ(engine.cache().pool().n_used(), 0);  // every choice gave its blocks back
  if (metrics) *metrics = engine.metrics();
  return c;
}

TEST(Fork, GreedyChoicesPrefillOnceAndAgree) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineMetrics m;
  const Choices four = run(*model, params(4, 0.0f, 24), &m);
  ASSERT_EQ(four.tokens.size(), 4u);
  const Choices one = run(*model, params(1, 0.0f, 24));
  for (const auto& [choice, tokens] : four.tokens) {
    EXPECT_EQ(tokens, one.tokens.at(0)) << "choice " << choice;
    EXPECT_EQ(four.reasons.at(choice), FinishReason::kLength);
  }
  EXPECT_EQ(four.request_ids.size(), 1u);  // every event names the request
  EXPECT_EQ(four.request_ended, 1);
  EXPECT_TRUE(four.ended_last);

  EXPECT_EQ(m.prompt_tokens, 40);
  EXPECT_EQ(m.prompt_tokens_computed, 40);  // one prefill, not four
  EXPECT_EQ(m.forked_choices, 3);
  EXPECT_EQ(m.fork_shared_blocks, 3 * 3);   // three choices took over the prompt's three blocks
  // The partial third block is copied by three of the four holders; the
  // last writes in place. The full blocks are never copied.
  EXPECT_EQ(m.kv_block_copies, 3);
  EXPECT_EQ(m.generated_tokens, 4 * 24);
}

TEST(Fork, SeededChoicesDifferAndRepeat) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  const Choices a = run(*model, params(4, 1.0f, 24));
  const Choices b = run(*model, params(4, 1.0f, 24));
  EXPECT_EQ(a.tokens, b.tokens);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& [choice, tokens] : a.tokens) distinct.insert(tokens);
  EXPECT_EQ(distinct.size(), 4u);
  // Choice 0 samples with the request's own seed, as n = 1 does.
  const Choices one = run(*model, params(1, 1.0f, 24));
  EXPECT_EQ(a.tokens.at(0), one.tokens.at(0));
}

TEST(Fork, CancelEndsEveryChoice) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config());
  Choices c;
  auto id = engine.submit(prompt_of(*model), params(4, 1.0f, 200), collect(c));
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine.step().ok());
  EXPECT_EQ(engine.metrics().running, 4);
  engine.cancel(*id);
  EXPECT_TRUE(engine.idle());
  ASSERT_EQ(c.reasons.size(), 4u);
  for (const auto& [choice, reason] : c.reasons) EXPECT_EQ(reason, FinishReason::kCancelled) << choice;
  EXPECT_EQ(c.request_ended, 1);
  EXPECT_TRUE(c.ended_last);
  EXPECT_EQ(engine.cache().pool().n_used(), 0);
}

TEST(Fork, NeedsAtLeastOneChoiceAndNoKvWindow) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config());
  EXPECT_FALSE(engine.check_params(params(0, 0.0f, 4)).ok());
  EngineConfig windowed = config();
  windowed.kv_window = 64;
  Engine window(*model, windowed);
  EXPECT_TRUE(window.check_params(params(1, 0.0f, 4)).ok());
  EXPECT_FALSE(window.check_params(params(2, 0.0f, 4)).ok());
}

}  // namespace
}  // namespace duet
