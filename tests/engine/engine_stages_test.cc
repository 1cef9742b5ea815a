// The step's execute and update stages, each alone on hand-built inputs:
// a SchedulerOutput into the ModelRunner, logits rows into the
// TokenSelector, chosen tokens into the OutputProcessor.
#include <gtest/gtest.h>

#include <memory>

#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/token_selector.h"
#include "engine/stories_model.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::load;
using testing::load_stories;
using testing::stories_path;

std::unique_ptr<Sequence> make_seq(std::vector<int32_t> tokens, RequestParams params = {}) {
  if (params.sampling.temperature != 0) params.sampling = SamplingParams::greedy();
  return std::make_unique<Sequence>(1, std::move(tokens), params, nullptr);
}

TEST(ModelRunner, RunsAHandBuiltScheduleAsOneForwardPass) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  ThreadPool pool(1);
  KvCache cache(model->kv_shape(), 16, KvType::F32);
  ModelRunner runner(*model, cache, pool);
  // a: a whole 5-token prompt (samples); b: the first 3 of 6 (does not).
  auto a = make_seq({1, 403, 407, 261, 378});
  auto b = make_seq({1, 500, 501, 502, 503, 504});
  ASSERT_TRUE(a->table.reserve(cache.pool(), 5) && b->table.reserve(cache.pool(), 3));
  SchedulerOutput plan;
  plan.chunks = {{a.get(), 5}, {b.get(), 3}};
  auto out = runner.execute(plan);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->sequences.size(), 1u);
  EXPECT_EQ(out->sequences[0].seq, a.get());
  EXPECT_EQ(out->sequences[0].n_rows, 1);
  EXPECT_EQ(runner.last_batch().size(), 8);
  EXPECT_EQ(a->n_computed, 0);  // advancing is the update stage's job

  // The same prompt alone through Model::forward gives the same row.
  KvCache alone_cache(model->kv_shape(), 16, KvType::F32);
  BlockTable table;
  ASSERT_TRUE(table.reserve(alone_cache.pool(), 5));
  Batch batch;
  const int32_t s = batch.add_sequence(&table);
  for (int32_t i = 0; i < 5; ++i) batch.add(a->tokens[static_cast<size_t>(i)], i, s, i == 4);
  std::vector<float> logits(static_cast<size_t>(out->n_vocab));
  ASSERT_TRUE(model->forward(batch, alone_cache, pool, logits.data()).ok());
  for (int32_t v = 0; v < out->n_vocab; ++v) EXPECT_NEAR(out->row(0)[v], logits[static_cast<size_t>(v)], 1e-5f);
}

// Rows of n_vocab logits, each peaked at one token.
std::vector<float> peaked_rows(int32_t n_vocab, std::initializer_list<int32_t> peaks) {
  std::vector<float> rows;
  for (int32_t p : peaks) {
    std::vector<float> row(static_cast<size_t>(n_vocab), 0.0f);
    row[static_cast<size_t>(p)] = 10.0f;
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

TEST(TokenSelector, DrawsFromEachSequencesRow) {
  constexpr int32_t kVocab = 16;
  auto a = make_seq({1, 2, 3});
  auto b = make_seq({1, 5});
  std::vector<float> rows = peaked_rows(kVocab, {7, 11});
  ModelOutput out{kVocab, {{a.get(), 0, 1}, {b.get(), 1, 1}}, rows.data()};
  BlockPool blocks(4);
  ThreadPool pool(1);
  TokenSelector selector;
  const auto& chosen = selector.select(out, nullptr, blocks, pool);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].token, 7);
  EXPECT_EQ(chosen[1].token, 11);
  EXPECT_EQ(a->tokens.back(), 7);
  EXPECT_EQ(b->tokens.back(), 11);
}

TEST(TokenSelector, KeepsDraftsUpToTheFirstTheTargetRejects) {
  constexpr int32_t kVocab = 16;
  // The pending token 3, then drafts 4 and 5 (deterministic, as lookup's).
  auto seq = make_seq({1, 2, 3, 4, 5});
  seq->n_computed = 2;  // as the update stage leaves it: drafts not yet computed
  seq->spec.n_draft = 2;
  seq->spec.q.assign(2, TokenDist{});
  // The target agrees with draft 4, then wants 9 where 5 was drafted.
  std::vector<float> rows = peaked_rows(kVocab, {4, 9, 12});
  ModelOutput out{kVocab, {{seq.get(), 0, 3}}, rows.data()};
  BlockPool blocks(4);
  ThreadPool pool(1);
  Speculator speculator(make_lookup_drafter(1), 4);
  TokenSelector selector;
  const auto& chosen = selector.select(out, &speculator, blocks, pool);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].token, 4);
  EXPECT_EQ(chosen[1].token, 9);
  EXPECT_EQ(seq->tokens, (std::vector<int32_t>{1, 2, 3, 4, 9}));
  EXPECT_EQ(seq->n_computed, 4);
  EXPECT_EQ(seq->spec.n_draft, 0);
  EXPECT_EQ(selector.spec_counts().drafted, 2);
  EXPECT_EQ(selector.spec_counts().accepted, 1);
}

TEST(OutputProcessor, AppliesTheStopRules) {
  auto model = load_stories();
  ASSERT_TRUE(model);
  const Tokenizer& tok = model->tokenizer();
  OutputProcessor output(tok, model->config().n_vocab, /*ctx=*/8, /*ctx_limited=*/true);
  EngineMetrics metrics;
  RequestParams params;
  params.max_tokens = 3;
  params.stop = {"zzz"};
  auto seq = make_seq({1, 403, 407}, params);
  seq->text.emplace(tok, params.stop);
  const int32_t word = 403;
  seq->tokens.push_back(word);
  TokenOutcome first = output.process(seq.get(), word, nullptr, metrics);
  EXPECT_EQ(first.finish, FinishReason::kNone);
  EXPECT_EQ(first.event.token, word);
  EXPECT_EQ(seq->timings.n_generated, 1);
  seq->tokens.push_back(word);
  EXPECT_EQ(output.process(seq.get(), word, nullptr, metrics).finish, FinishReason::kNone);
  seq->tokens.push_back(word);
  EXPECT_EQ(output.process(seq.get(), word, nullptr, metrics).finish, FinishReason::kLength);
  EXPECT_EQ(metrics.generated_tokens, 3);

  // End of generation stops at once and adds no text.
  auto eos_seq = make_seq({1, 403});
  eos_seq->text.emplace(tok, std::vector<std::string>{});
  TokenOutcome eos = output.process(eos_seq.get(), tok.eos_id(), nullptr, metrics);
  EXPECT_EQ(eos.finish, FinishReason::kStop);
  EXPECT_TRUE(eos.event.text.empty());

  // The context: a prompt of 7 in a context of 8 ends with its first token.
  auto full = make_seq({1, 2, 3, 4, 5, 6, 7});
  full->text.emplace(tok, std::vector<std::string>{});
  EXPECT_EQ(output.process(full.get(), word, nullptr, metrics).finish, FinishReason::kContext);
}

}  // namespace
}  // namespace duet
