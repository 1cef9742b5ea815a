// The scheduler on its own, without a model (vLLM's way of testing it).
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

namespace duet {
namespace {

std::unique_ptr<Sequence> make_seq(int64_t id, int32_t n_prompt) {
  return std::make_unique<Sequence>(id, std::vector<int32_t>(static_cast<size_t>(n_prompt), 1),
                                    RequestParams{}, nullptr);
}

// Marks every scheduled chunk as computed, as the engine does after forward.
void complete(const std::vector<ScheduledChunk>& chunks) {
  for (const auto& c : chunks) c.seq->n_computed += c.n_tokens;
}

TEST(Scheduler, ChunksLongPromptsUnderTheTokenBudget) {
  BlockPool pool(64);
  Scheduler s({/*max_batch_tokens=*/32, /*max_seqs=*/4});
  auto a = make_seq(1, 80);
  s.add(a.get());
  std::vector<Sequence*> unfit;
  int32_t steps = 0;
  while (a->n_pending() > 0) {
    auto chunks = s.schedule(pool, unfit);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_LE(chunks[0].n_tokens, 32);
    complete(chunks);
    ++steps;
  }
  EXPECT_EQ(steps, 3);  // 32 + 32 + 16
  EXPECT_TRUE(unfit.empty());
}

TEST(Scheduler, DecodesGoFirstAndNewPromptsFillTheRest) {
  BlockPool pool(64);
  Scheduler s({16, 4});
  auto a = make_seq(1, 4);
  s.add(a.get());
  std::vector<Sequence*> unfit;
  complete(s.schedule(pool, unfit));
  a->tokens.push_back(7);  // a sampled one token: it now decodes
  auto b = make_seq(2, 40);
  s.add(b.get());
  auto chunks = s.schedule(pool, unfit);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].seq, a.get());
  EXPECT_EQ(chunks[0].n_tokens, 1);
  EXPECT_EQ(chunks[1].seq, b.get());
  EXPECT_EQ(chunks[1].n_tokens, 15);
}

TEST(Scheduler, RespectsTheSequenceLimit) {
  BlockPool pool(64);
  Scheduler s({512, 2});
  auto a = make_seq(1, 3), b = make_seq(2, 3), c = make_seq(3, 3);
  s.add(a.get());
  s.add(b.get());
  s.add(c.get());
  std::vector<Sequence*> unfit;
  EXPECT_EQ(s.schedule(pool, unfit).size(), 2u);
  EXPECT_EQ(s.n_waiting(), 1u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockPool pool(2);  // 32 token slots
  Scheduler s({512, 4});
  auto a = make_seq(1, 16), b = make_seq(2, 16);
  s.add(a.get());
  s.add(b.get());
  std::vector<Sequence*> unfit;
  complete(s.schedule(pool, unfit));
  EXPECT_EQ(pool.n_free(), 0);
  a->tokens.push_back(5);  // a needs a third block for its 17th token
  b->tokens.push_back(5);
  auto chunks = s.schedule(pool, unfit);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].seq, a.get());
  EXPECT_EQ(b->n_computed, 0);  // preempted: recomputed later
  EXPECT_EQ(b->timings.n_preemptions, 1);
  EXPECT_EQ(s.n_waiting(), 1u);
  s.remove(a.get(), pool);
  EXPECT_EQ(pool.n_free(), 2);
  chunks = s.schedule(pool, unfit);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].seq, b.get());
  EXPECT_EQ(chunks[0].n_tokens, 17);  // prompt and the token it had generated
}

TEST(Scheduler, ReportsASequenceThatCanNeverFit) {
  BlockPool pool(2);
  Scheduler s({512, 4});
  auto a = make_seq(1, 40);
  s.add(a.get());
  std::vector<Sequence*> unfit;
  EXPECT_TRUE(s.schedule(pool, unfit).empty());
  ASSERT_EQ(unfit.size(), 1u);
  EXPECT_EQ(unfit[0], a.get());
  EXPECT_TRUE(s.empty());
}

TEST(Scheduler, RemoveFreesBlocksOfARunningSequence) {
  BlockPool pool(8);
  Scheduler s({512, 4});
  auto a = make_seq(1, 40);
  s.add(a.get());
  std::vector<Sequence*> unfit;
  complete(s.schedule(pool, unfit));
  EXPECT_EQ(pool.n_used(), 3);
  s.remove(a.get(), pool);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_TRUE(s.empty());
}

}  // namespace
}  // namespace duet
