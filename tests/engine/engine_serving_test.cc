// The engine features a server needs: prefix caching, stop strings,
// logprobs, metrics, and the thread-safe EngineLoop.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "test_util.h"

namespace duet {
namespace {

class EngineServing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = Model::load(testing::shared_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(*m).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static std::vector<int32_t> encode(const std::string& s) {
    return model_->tokenizer().encode(s, true);
  }
  static RequestParams greedy(int32_t n) {
    RequestParams p;
    p.sampling = SamplingParams::greedy();
    p.max_tokens = n;
    return p;
  }
  static Model* model_;
};
Model* EngineServing::model_ = nullptr;

struct Out {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenEvent> events;
  FinishReason reason = FinishReason::kNone;
  RequestTimings timings;
};

TokenCallback collect(Out& o) {
  return [&o](const TokenEvent& ev) {
    if (ev.token >= 0) o.tokens.push_back(ev.token);
    o.text += ev.text;
    o.events.push_back(ev);
    if (ev.finished) {
      o.reason = ev.reason;
      o.timings = *ev.timings;
    }
  };
}

// A prompt several blocks long, shared by the requests below.
const char* kSharedPrefix =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends. One day, she saw a big red ball";

TEST_F(EngineServing, PrefixCacheReusesBlocksAndGivesTheSameOutput) {
  const std::vector<std::string> tails = {" and she", ". The ball was", " near the tree. She"};
  auto run_all = [&](bool caching, EngineMetrics* metrics) {
    EngineConfig cfg;
    cfg.n_threads = 2;
    cfg.scheduler.prefix_caching = caching;
    Engine e(*model_, cfg);
    std::vector<Out> outs(tails.size());
    // One after another, so each later request finds the first one's blocks.
    for (size_t i = 0; i < tails.size(); ++i) {
      EXPECT_TRUE(e.submit(encode(kSharedPrefix + tails[i]), greedy(24), collect(outs[i])).ok());
      EXPECT_TRUE(e.run_until_idle().ok());
    }
    EXPECT_EQ(e.cache().pool().n_used(), 0);
    if (metrics) *metrics = e.metrics();
    return outs;
  };
  EngineMetrics with;
  const auto cached = run_all(true, &with);
  const auto uncached = run_all(false, nullptr);
  const int32_t prefix_blocks = static_cast<int32_t>(encode(kSharedPrefix).size()) / kBlockTokens;
  ASSERT_GE(prefix_blocks, 2);
  for (size_t i = 0; i < tails.size(); ++i) {
    EXPECT_EQ(cached[i].tokens, uncached[i].tokens) << tails[i];
    EXPECT_EQ(uncached[i].timings.n_cached, 0);
    if (i > 0) { EXPECT_GE(cached[i].timings.n_cached, prefix_blocks * kBlockTokens) << tails[i]; }
  }
  EXPECT_EQ(cached[0].timings.n_cached, 0);
  EXPECT_GT(with.prefix_hit_tokens, 0);
  EXPECT_GT(with.prefix_hit_rate(), 0.3);
  EXPECT_GT(with.kv.cached, 0);  // kept after their requests ended
}

TEST_F(EngineServing, IdenticalPromptsShareBlocksWhileBothRun) {
  EngineConfig cfg;
  cfg.n_threads = 2;
  Engine e(*model_, cfg);
  Out a, b;
  ASSERT_TRUE(e.submit(encode(kSharedPrefix), greedy(30), collect(a)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.step().ok());
  ASSERT_TRUE(e.submit(encode(kSharedPrefix), greedy(30), collect(b)).ok());
  ASSERT_TRUE(e.step().ok());
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.running, 2);
  // Shared blocks are stored once.
  EXPECT_LE(m.kv_tokens_stored, static_cast<int64_t>(m.kv.used) * kBlockTokens);
  ASSERT_TRUE(e.run_until_idle().ok());
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_GT(b.timings.n_cached, 0);
}

TEST_F(EngineServing, StopStringEndsGenerationAndIsNotReturned) {
  EngineConfig cfg;
  Engine e(*model_, cfg);
  Out full;
  ASSERT_TRUE(e.submit(encode("Once upon a time"), greedy(40), collect(full)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  ASSERT_EQ(full.reason, FinishReason::kLength);
  // Stop at the second word of the full output.
  const size_t cut = full.text.find(' ', 1);
  ASSERT_NE(cut, std::string::npos);
  const std::string stop = full.text.substr(cut, 4);
  RequestParams p = greedy(40);
  p.stop = {stop};
  Out stopped;
  ASSERT_TRUE(e.submit(encode("Once upon a time"), p, collect(stopped)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  EXPECT_EQ(stopped.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, cut));
  EXPECT_LT(stopped.tokens.size(), full.tokens.size());
}

TEST_F(EngineServing, LogprobsComeFromTheRawLogits) {
  EngineConfig cfg;
  Engine e(*model_, cfg);
  RequestParams p = greedy(8);
  p.logprobs = 3;
  Out o;
  ASSERT_TRUE(e.submit(encode("Once upon a time"), p, collect(o)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  int n = 0;
  for (const TokenEvent& ev : o.events) {
    if (ev.token < 0) continue;
    ++n;
    ASSERT_EQ(ev.top_logprobs.size(), 3u);
    // Greedy picks the most likely token; its logprob is the top one.
    EXPECT_EQ(ev.top_logprobs[0].token, ev.token);
    EXPECT_FLOAT_EQ(ev.top_logprobs[0].logprob, ev.logprob);
    EXPECT_LE(ev.logprob, 0.0f);
    EXPECT_GE(ev.top_logprobs[0].logprob, ev.top_logprobs[1].logprob);
    EXPECT_GE(ev.top_logprobs[1].logprob, ev.top_logprobs[2].logprob);
  }
  EXPECT_EQ(n, 8);
}

TEST_F(EngineServing, MetricsCountRequestsTokensAndLatencies) {
  EngineConfig cfg;
  Engine e(*model_, cfg);
  Out a, b;
  ASSERT_TRUE(e.submit(encode("The cat"), greedy(5), collect(a)).ok());
  ASSERT_TRUE(e.submit(encode("The dog"), greedy(7), collect(b)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.finished_by_reason[static_cast<size_t>(FinishReason::kLength)], 2);
  EXPECT_EQ(m.generated_tokens, 12);
  EXPECT_EQ(m.ttft.count(), 2);
  EXPECT_EQ(m.itl.count(), 10);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.waiting, 0);
  EXPECT_EQ(m.kv.used, 0);
  EXPECT_EQ(m.kv.used + m.kv.cached + m.kv.free, m.kv.total);
}

// Waits for the finishing event of one request fed through an EngineLoop.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  Out out;
  bool done = false;
  TokenCallback callback() {
    return [this](const TokenEvent& ev) {
      std::lock_guard lock(mu);
      collect(out)(ev);
      if (ev.finished) {
        done = true;
        cv.notify_all();
      }
    };
  }
  bool wait(std::chrono::seconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [this] { return done; });
  }
};

TEST_F(EngineServing, LoopServesSubmitsFromManyThreadsLikeSoloRuns) {
  const std::vector<std::string> prompts = {"The cat", "Lily and Ben", "One day, a big dog",
                                            "Tom had a red", "The sun was", "Sara liked"};
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) {
    EngineConfig cfg;
    Engine e(*model_, cfg);
    Out o;
    ASSERT_TRUE(e.submit(encode(p), greedy(20), collect(o)).ok());
    ASSERT_TRUE(e.run_until_idle().ok());
    solo.push_back(o.tokens);
  }
  EngineConfig cfg;
  cfg.n_threads = 2;
  Engine engine(*model_, cfg);
  EngineLoop loop(engine, 64);
  std::vector<Waiter> waiters(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      ASSERT_TRUE(loop.try_reserve());
      ASSERT_TRUE(loop.submit(encode(prompts[i]), greedy(20), waiters[i].callback()).ok());
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(waiters[i].wait(std::chrono::seconds(60)));
    EXPECT_EQ(waiters[i].out.tokens, solo[i]) << prompts[i];
  }
  // The in-flight count drops after the callback; give the loop a moment.
  for (int i = 0; i < 200 && loop.in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loop.in_flight(), 0);
}

TEST_F(EngineServing, LoopCancelFreesBlocksAndLimitsInFlight) {
  EngineConfig cfg;
  cfg.n_threads = 1;
  Engine engine(*model_, cfg);
  EngineLoop loop(engine, 1);
  Waiter w;
  RequestParams p = greedy(100000);
  p.ignore_eos = true;
  ASSERT_TRUE(loop.try_reserve());
  EXPECT_FALSE(loop.try_reserve());  // the one slot is taken
  auto id = loop.submit(encode("Once upon a time"), p, w.callback());
  ASSERT_TRUE(id.ok());
  loop.cancel(*id);
  ASSERT_TRUE(w.wait(std::chrono::seconds(30)));
  EXPECT_EQ(w.out.reason, FinishReason::kCancelled);
  for (int i = 0; i < 200 && (loop.metrics().running > 0 || loop.metrics().kv.used > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loop.metrics().running, 0);
  EXPECT_EQ(loop.metrics().kv.used, 0);
  // The in-flight slot is returned after the final callback; give the loop a moment.
  for (int i = 0; i < 200 && loop.in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(loop.try_reserve());
  ASSERT_TRUE(loop.submit({}, p, nullptr).error().message.find("empty") != std::string::npos);
}

}  // namespace
}  // namespace duet
