// Embedding jobs in the EngineLoop take turns with generation: one forward
// pass of at most a step's token budget between two steps, so a stream
// submitted beside a large job goes on and finishes first, and the job's
// vectors are the bits it gives run whole. A job that finds no room waits
// for running requests' blocks; a cancelled one gives its blocks back.
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "engine/stories_model.h"

namespace duet {
namespace embedding_turns {  // named: the unity build joins test files

using namespace std::chrono_literals;
using testing::load_stories;

constexpr int32_t kBudget = 16;  // tokens per step, and per embedding pass

EngineConfig config(int32_t n_kv_blocks = 0) {
  EngineConfig c;
  c.n_threads = 2;
  c.scheduler.max_batch_tokens = kBudget;
  c.n_kv_blocks = n_kv_blocks;
  return c;
}

RequestParams greedy(int32_t n) {
  RequestParams p;
  p.sampling = SamplingParams::greedy();
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

// 96 inputs of 5 to 24 tokens (about 1400 tokens, some 90 passes), most of
// them cut across two passes.
std::vector<std::vector<int32_t>> many_inputs(const Model& m) {
  std::vector<std::vector<int32_t>> out;
  const int32_t n_vocab = m.config().n_vocab;
  for (int32_t i = 0; i < 96; ++i) {
    std::vector<int32_t> input;
    for (int32_t p = 0; p < 5 + i % 20; ++p) input.push_back(1 + (i * 7 + p * 13) % (n_vocab - 1));
    out.push_back(std::move(input));
  }
  return out;
}

std::vector<int32_t> generate_alone(Model& model, const std::vector<int32_t>& prompt, const RequestParams& p) {
  Engine engine(model, config());
  std::vector<int32_t> out;
  EXPECT_TRUE(engine.submit(prompt, p, [&](const TokenEvent& ev) { if (ev.token >= 0) out.push_back(ev.token); }).ok());
  EXPECT_TRUE(engine.run_until_idle().ok());
  return out;
}

// A request whose first event holds the engine thread until release(), so
// that whatever the test queues meanwhile is taken up in one turn of the
// loop, in the order queued.
class Hold {
 public:
  Hold(EngineLoop& loop, const std::vector<int32_t>& prompt, int32_t max_tokens) {
    EXPECT_TRUE(loop.try_reserve());
    auto id = loop.submit(prompt, greedy(max_tokens), [this](const TokenEvent&) {
      if (entered_) return;
      entered_ = true;
      held_.set_value();
      open_.wait();
    });
    EXPECT_TRUE(id.ok());
    held_.get_future().wait();
  }
  void release() { release_.set_value(); }

 private:
  bool entered_ = false;  // engine thread only
  std::promise<void> held_, release_;
  std::shared_future<void> open_ = release_.get_future().share();
};

TEST(EngineLoopEmbeddings, AStreamGoesOnBetweenPassesAndFinishesFirst) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  const auto inputs = many_inputs(*model);
  const std::vector<int32_t> prompt = model->tokenizer().encode("Once upon a time", true);
  Engine reference(*model, config());
  auto expected = reference.embed(inputs, Pooling::kMean);
  ASSERT_TRUE(expected.ok());
  const std::vector<int32_t> solo = generate_alone(*model, prompt, greedy(16));

  Engine engine(*model, config());
  EngineLoop loop(engine, 8);
  Hold hold(loop, prompt, 2);
  ASSERT_TRUE(loop.try_reserve());
  EngineLoop::PendingEmbeddings job = loop.embed(inputs, Pooling::kMean);
  // The stream notes, at each token, the embedding tokens run by then.
  std::vector<int32_t> tokens;
  std::vector<int64_t> embedded;
  bool job_done_first = true;
  std::promise<void> ended;
  ASSERT_TRUE(loop.try_reserve());
  ASSERT_TRUE(loop.submit(prompt, greedy(16), [&](const TokenEvent& ev) {
                    if (ev.token >= 0) tokens.push_back(ev.token);
                    if (!ev.request_ended) return embedded.push_back(loop.metrics().embedding_tokens);
                    job_done_first = job.vectors.wait_for(0s) == std::future_status::ready;
                    ended.set_value();
                  }).ok());
  hold.release();
  ASSERT_EQ(ended.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_FALSE(job_done_first);
  EXPECT_EQ(tokens, solo);
  // One step's events are a turn of the loop apart: at most one pass ran
  // between them, and passes did run.
  ASSERT_GE(embedded.size(), 2u);
  for (size_t k = 1; k < embedded.size(); ++k) EXPECT_LE(embedded[k] - embedded[k - 1], kBudget) << k;
  EXPECT_GT(embedded.back(), embedded.front());

  ASSERT_EQ(job.vectors.wait_for(60s), std::future_status::ready);
  Result<Embeddings> got = job.vectors.get();
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(*got, *expected);  // the same passes, so the same bits
}

TEST(EngineLoopEmbeddings, AJobWithNoRoomWaitsForARunningRequestsBlocks) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  // Four blocks: the running request's 33-token prompt takes three, so the
  // job's 40-token input (three blocks) fits only once it has ended.
  Engine engine(*model, config(/*n_kv_blocks=*/4));
  EngineLoop loop(engine, 8);
  const std::vector<int32_t> input(40, 7);
  Hold hold(loop, std::vector<int32_t>(33, 5), 8);
  ASSERT_TRUE(loop.try_reserve());
  EngineLoop::PendingEmbeddings job = loop.embed({input}, Pooling::kMean);
  hold.release();
  ASSERT_EQ(job.vectors.wait_for(60s), std::future_status::ready);
  Result<Embeddings> got = job.vectors.get();
  ASSERT_TRUE(got.ok()) << got.error().message;
  Engine reference(*model, config());
  EXPECT_EQ(*got, *reference.embed({input}, Pooling::kMean));
}

TEST(EngineLoopEmbeddings, ACancelledJobEndsWithAnErrorAndGivesItsBlocksBack) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config());
  const int32_t n_blocks = engine.cache().pool().n_blocks();
  EngineLoop loop(engine, 8);
  {
    Hold hold(loop, model->tokenizer().encode("The cat", true), 2);
    ASSERT_TRUE(loop.try_reserve());
    EngineLoop::PendingEmbeddings job = loop.embed(many_inputs(*model), Pooling::kMean);
    loop.cancel(job.id);
    hold.release();
    ASSERT_EQ(job.vectors.wait_for(60s), std::future_status::ready);
    Result<Embeddings> got = job.vectors.get();
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.error().message.find("cancelled"), std::string::npos) << got.error().message;
  }
  // Every block back and every reservation returned, once the loop is idle.
  for (int i = 0; i < 400 && (loop.in_flight() > 0 || loop.metrics().kv.used > 0); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(loop.in_flight(), 0);
  EXPECT_EQ(loop.metrics().kv.used, 0);
  EXPECT_EQ(loop.metrics().kv.total, n_blocks);
}

}  // namespace embedding_turns
}  // namespace duet
