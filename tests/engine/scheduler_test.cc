// The schedule stage on its own, without a model (vLLM's way of testing it):
// hand-built sequences in, a SchedulerOutput out.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

namespace duet {
namespace {

std::unique_ptr<Sequence> make_seq(int64_t id, int32_t n_prompt) {
  return std::make_unique<Sequence>(id, std::vector<int32_t>(static_cast<size_t>(n_prompt), 1),
                                    RequestParams{}, nullptr);
}

// A scheduler over a pool of `n_blocks`, and what the engine does between
// steps: mark each scheduled chunk computed.
struct Stepper {
  Stepper(int32_t n_blocks, SchedulerConfig config) : pool(n_blocks), s(config) {}
  SchedulerOutput step() {
    SchedulerOutput out = s.schedule(pool);
    for (const auto& c : out.chunks) c.seq->n_computed += c.n_tokens - c.n_draft;
    return out;
  }
  BlockPool pool;
  Scheduler s;
};

TEST(Scheduler, ChunksLongPromptsUnderTheTokenBudget) {
  Stepper t(64, {/*max_batch_tokens=*/32, /*max_seqs=*/4});
  auto a = make_seq(1, 80);
  t.s.add(a.get());
  int32_t steps = 0;
  while (a->n_pending() > 0) {
    SchedulerOutput out = t.step();
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_LE(out.chunks[0].n_tokens, 32);
    EXPECT_TRUE(out.unfittable.empty());
    ++steps;
  }
  EXPECT_EQ(steps, 3);  // 32 + 32 + 16
}

TEST(Scheduler, OnlyTheLastChunkOfAPromptSamples) {
  Stepper t(64, {32, 4});
  auto a = make_seq(1, 40);
  t.s.add(a.get());
  SchedulerOutput first = t.s.schedule(t.pool);
  EXPECT_FALSE(first.chunks[0].samples());
  EXPECT_EQ(first.chunks[0].n_logits(), 0);
  a->n_computed += first.chunks[0].n_tokens;
  SchedulerOutput last = t.s.schedule(t.pool);
  EXPECT_TRUE(last.chunks[0].samples());
  EXPECT_EQ(last.chunks[0].n_logits(), 1);
}

TEST(Scheduler, DecodesGoFirstAndNewPromptsFillTheRest) {
  Stepper t(64, {16, 4});
  auto a = make_seq(1, 4);
  t.s.add(a.get());
  t.step();
  a->tokens.push_back(7);  // a sampled one token: it now decodes
  auto b = make_seq(2, 40);
  t.s.add(b.get());
  SchedulerOutput out = t.s.schedule(t.pool);
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].seq, a.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 1);
  EXPECT_EQ(out.chunks[1].seq, b.get());
  EXPECT_EQ(out.chunks[1].n_tokens, 15);
}

TEST(Scheduler, DraftTokensGetTheirOwnFieldAndRowsWithinTheBudget) {
  Stepper t(64, {4, 4});
  auto a = make_seq(1, 3);
  t.s.add(a.get());
  t.step();
  // A sampled token and 5 drafts after it: only 3 fit beside it in 4 tokens.
  a->tokens.insert(a->tokens.end(), {7, 8, 9, 10, 11, 12});
  a->spec.n_draft = 5;
  SchedulerOutput out = t.s.schedule(t.pool);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_tokens, 4);
  EXPECT_EQ(out.chunks[0].n_draft, 3);
}

TEST(Scheduler, RespectsTheSequenceLimit) {
  Stepper t(64, {512, 2});
  auto a = make_seq(1, 3), b = make_seq(2, 3), c = make_seq(3, 3);
  for (auto* seq : {a.get(), b.get(), c.get()}) t.s.add(seq);
  EXPECT_EQ(t.s.schedule(t.pool).chunks.size(), 2u);
  EXPECT_EQ(t.s.n_waiting(), 1u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  Stepper t(2, {512, 4});  // 32 token slots
  auto a = make_seq(1, 16), b = make_seq(2, 16);
  t.s.add(a.get());
  t.s.add(b.get());
  t.step();
  EXPECT_EQ(t.pool.n_free(), 0);
  a->tokens.push_back(5);  // a needs a third block for its 17th token
  b->tokens.push_back(5);
  SchedulerOutput out = t.step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, a.get());
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b.get());
  EXPECT_EQ(b->n_computed, 0);  // recomputed later
  EXPECT_EQ(b->timings.n_preemptions, 1);
  EXPECT_EQ(t.s.n_waiting(), 1u);
  t.s.remove(a.get(), t.pool);
  EXPECT_EQ(t.pool.n_free(), 2);
  out = t.s.schedule(t.pool);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, b.get());
  EXPECT_EQ(out.chunks[0].n_tokens, 17);  // prompt and the token it had generated
}

TEST(Scheduler, ReportsASequenceThatCanNeverFit) {
  Stepper t(2, {512, 4});
  auto a = make_seq(1, 40);
  t.s.add(a.get());
  SchedulerOutput out = t.s.schedule(t.pool);
  EXPECT_TRUE(out.empty());
  ASSERT_EQ(out.unfittable.size(), 1u);
  EXPECT_EQ(out.unfittable[0], a.get());
  EXPECT_TRUE(t.s.empty());
}

TEST(Scheduler, RemoveFreesBlocksOfARunningSequence) {
  Stepper t(8, {512, 4});
  auto a = make_seq(1, 40);
  t.s.add(a.get());
  t.step();
  EXPECT_EQ(t.pool.n_used(), 3);
  t.s.remove(a.get(), t.pool);
  EXPECT_EQ(t.pool.n_used(), 0);
  EXPECT_TRUE(t.s.empty());
}

}  // namespace
}  // namespace duet
