// Embeddings through the engine on real weights (stories260K): pooling,
// normalisation, and vectors that do not depend on how inputs are batched
// or chunked, nor on requests running beside them.
#include "engine/embedder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/engine.h"
#include "engine/stories_model.h"

namespace duet {
namespace {

using testing::load_stories;

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

EngineConfig config(int32_t max_batch_tokens, int32_t n_kv_blocks = 0) {
  EngineConfig c;
  c.n_threads = 2;
  c.scheduler.max_batch_tokens = max_batch_tokens;
  c.n_kv_blocks = n_kv_blocks;
  return c;
}

std::vector<std::vector<int32_t>> inputs(const Model& m) {
  const Tokenizer& tok = m.tokenizer();
  return {tok.encode("Once upon a time, there was a little girl named Lily.", true),
          tok.encode("The cat", true),
          tok.encode("She liked to play outside in the park with her big red ball every day.", true)};
}

TEST(Embedder, UnitVectorsThatDoNotDependOnBatchingOrChunking) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine whole(*model, config(512));
  Engine chunked(*model, config(5));  // every input split over several passes
  const auto in = inputs(*model);
  for (Pooling p : {Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    auto a = whole.embed(in, p);
    auto b = chunked.embed(in, p);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      double norm = 0;
      for (float x : (*a)[i]) norm += static_cast<double>(x) * x;
      EXPECT_NEAR(norm, 1.0, 1e-5);
      EXPECT_LT(max_diff((*a)[i], (*b)[i]), 1e-5) << pooling_name(p) << " input " << i;
      auto alone = whole.embed({in[i]}, p);
      ASSERT_TRUE(alone.ok());
      EXPECT_LT(max_diff((*a)[i], (*alone)[0]), 1e-5) << pooling_name(p) << " input " << i;
    }
  }
}

TEST(Embedder, PoolingsDifferAsCausalAttentionSays) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config(512));
  const auto in = inputs(*model);
  // The first token attends only to itself: cls of a sentence is the mean
  // (and the last) of its first token alone.
  auto cls = engine.embed({in[0]}, Pooling::kCls);
  auto first = engine.embed({{in[0][0]}}, Pooling::kMean);
  auto mean = engine.embed({in[0]}, Pooling::kMean);
  auto last = engine.embed({in[0]}, Pooling::kLast);
  ASSERT_TRUE(cls.ok() && first.ok() && mean.ok() && last.ok());
  EXPECT_LT(max_diff((*cls)[0], (*first)[0]), 1e-5);
  EXPECT_GT(max_diff((*mean)[0], (*cls)[0]), 1e-3);
  EXPECT_GT(max_diff((*last)[0], (*mean)[0]), 1e-3);
  // The last of a prefix is the last of that prefix, whatever follows it
  // in other inputs.
  std::vector<int32_t> prefix(in[0].begin(), in[0].begin() + 4);
  auto a = engine.embed({prefix, in[0]}, Pooling::kLast);
  auto b = engine.embed({prefix}, Pooling::kLast);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(max_diff((*a)[0], (*b)[0]), 1e-5);
}

TEST(Embedder, RunningRequestsKeepTheirBlocksAndTheirText) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config(512));
  RequestParams greedy;
  greedy.sampling = SamplingParams::greedy();
  greedy.max_tokens = 40;
  auto run = [&](bool embed_between) {
    std::vector<int32_t> out;
    auto id = engine.submit(model->tokenizer().encode("Once upon a time", true), greedy,
                            [&](const TokenEvent& ev) { if (ev.token >= 0) out.push_back(ev.token); });
    EXPECT_TRUE(id.ok());
    while (!engine.idle()) {
      EXPECT_TRUE(engine.step().ok());
      if (embed_between) {
        EXPECT_TRUE(engine.embed(inputs(*model), Pooling::kMean).ok());
      }
    }
    return out;
  };
  const int32_t free_before = engine.cache().pool().n_free();
  EXPECT_EQ(run(false), run(true));
  EXPECT_EQ(engine.cache().pool().n_free(), free_before);
}

TEST(Embedder, AJobRunsAPassAtATimeHoldingOnlyTheInputItCut) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  constexpr int32_t kBudget = 7;
  Engine engine(*model, config(kBudget));
  const auto in = inputs(*model);
  int64_t total = 0;
  for (const auto& input : in) total += static_cast<int64_t>(input.size());
  const int32_t free_before = engine.cache().pool().n_free();
  auto job = engine.start_embedding(in, Pooling::kMean);
  ASSERT_TRUE(job.ok());
  int64_t ran = 0;
  int32_t passes = 0;
  while (!(*job)->done()) {
    ASSERT_TRUE(engine.embed_pass(**job).ok());
    const int64_t now = engine.metrics().embedding_tokens;
    EXPECT_GT(now - ran, 0);
    EXPECT_LE(now - ran, kBudget);
    ran = now;
    ++passes;
    // Between passes only the input a pass cut holds blocks: all of its own.
    ASSERT_LE((*job)->open().size(), 1u);
    const int32_t held = (*job)->open().empty() ? 0 : (*job)->open()[0].table.n_held();
    if (!(*job)->open().empty()) {
      EXPECT_EQ(held, blocks_for_tokens(static_cast<int32_t>(in[(*job)->open()[0].index].size())));
    }
    EXPECT_EQ(engine.cache().pool().n_free(), free_before - held);
  }
  EXPECT_EQ(ran, total);
  EXPECT_EQ(passes, (total + kBudget - 1) / kBudget);  // every pass but the last is full
  // The same bits as the job run whole: the passes are the same batches.
  auto whole = engine.embed(in, Pooling::kMean);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*job)->take_vectors(), *whole);
}

TEST(Embedder, AJobEndedEarlyGivesItsBlocksBack) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config(5));
  const int32_t free_before = engine.cache().pool().n_free();
  {
    auto job = engine.start_embedding(inputs(*model), Pooling::kLast);
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE(engine.embed_pass(**job).ok());
    ASSERT_TRUE((*job)->holds_blocks());  // its first input is longer than a pass
    EXPECT_LT(engine.cache().pool().n_free(), free_before);
  }
  EXPECT_EQ(engine.cache().pool().n_free(), free_before);
}

TEST(Embedder, AnInputTheCacheCannotHoldNowIsCacheFull) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  Engine engine(*model, config(512, /*n_kv_blocks=*/2));  // 32 token slots
  auto ok = engine.embed({std::vector<int32_t>(32, 5)}, Pooling::kMean);
  EXPECT_TRUE(ok.ok());
  // Two inputs of 20 tokens take turns in the two blocks.
  EXPECT_TRUE(engine.embed({std::vector<int32_t>(20, 5), std::vector<int32_t>(20, 6)}, Pooling::kMean).ok());
  auto full = engine.embed({std::vector<int32_t>(40, 5)}, Pooling::kMean);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, kCacheFull);
  EXPECT_EQ(engine.cache().pool().n_free(), 2);
}

TEST(Embedder, BadInputsAndPoolingsAreErrors) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  EngineConfig c = config(512);
  c.ctx = 16;
  Engine engine(*model, c);
  EXPECT_FALSE(engine.embed({{}}, Pooling::kMean).ok());
  EXPECT_FALSE(engine.embed({{1, 512}}, Pooling::kMean).ok());
  auto long_input = engine.embed({std::vector<int32_t>(17, 1)}, Pooling::kMean);
  ASSERT_FALSE(long_input.ok());
  EXPECT_EQ(long_input.error().code, kContextLengthExceeded);
  EXPECT_TRUE(engine.embed({std::vector<int32_t>(16, 1)}, Pooling::kMean).ok());
  EXPECT_FALSE(engine.embed({{1, 2}}, Pooling::kNone).ok());
  EXPECT_FALSE(engine.embed({{1, 2}}, Pooling::kRank).ok());
}

}  // namespace
}  // namespace duet
