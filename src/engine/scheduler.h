// Chooses, every step, which sequences run and how many tokens each gives,
// under a token budget (vLLM's shape: no prefill or decode mode; each
// sequence has computed and pending tokens). Running sequences go first —
// one token each when decoding, a chunk of their prompt when prefilling —
// then waiting ones join while budget, sequence slots and KV blocks last.
// When blocks run out, the newest running sequence is preempted: its blocks
// are freed and it waits to be recomputed. With prefix caching, a sequence
// joining starts from the cached blocks of its longest cached prefix. The
// choices forked off one request (RequestParams::n) share its prompt's
// blocks; a shared block is copied before a sequence writes into it
// (copy-on-write, SchedulerOutput::copies).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/scheduler_output.h"
#include "engine/sequence.h"
#include "kv/block_pool.h"

namespace duet {

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;
  int32_t max_seqs = 16;
  bool prefix_caching = true;
  int32_t max_chunk_tokens = 0;  // most tokens of one sequence per step; 0: no limit
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config) : config_(config) {}

  void add(Sequence* seq) { waiting_.push_back(seq); }
  // A sequence forked off a running one (its blocks shared): it runs from
  // the next step on.
  void add_running(Sequence* seq) { running_.push_back(seq); }
  // Removes a sequence wherever it is (finished or cancelled); frees its blocks.
  void remove(Sequence* seq, BlockPool& pool);

  // This step's chunks, with what was preempted and what can never fit.
  // Draft tokens at a sequence's end are verified only as far as the chunk
  // has room for them (ScheduledChunk::n_draft).
  SchedulerOutput schedule(BlockPool& pool);

  // Prompt tokens looked up in the prefix cache on first admission, and of
  // those found there.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  const std::vector<Sequence*>& running() const { return running_; }
  bool prefix_caching() const { return config_.prefix_caching; }

  size_t n_waiting() const { return waiting_.size(); }
  size_t n_running() const { return running_.size(); }
  bool empty() const { return waiting_.empty() && running_.empty(); }

 private:
  void preempt(Sequence* seq, BlockPool& pool, SchedulerOutput& out);
  void reuse_cached_prefix(Sequence* seq, BlockPool& pool);
  int32_t chunk_size(const Sequence* seq, int32_t budget) const;
  // Blocks for the sequence's next n tokens, each of its own: a block it
  // shares with a forked sibling is copied before it is written.
  bool make_room(Sequence* seq, int32_t n, BlockPool& pool, SchedulerOutput& out);
  // Room among the running for the sequence and the choices it will fork.
  bool has_slots(const Sequence* seq) const;
  void admit_waiting(BlockPool& pool, int32_t& budget, SchedulerOutput& out);

  SchedulerConfig config_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order; the back is the newest
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace duet
