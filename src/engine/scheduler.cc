#include "engine/scheduler.h"

#include <algorithm>

#include "kv/prefix_cache.h"

namespace duet {

namespace {

// Gives back every block a sequence holds and forgets what it computed.
void reset_kv(Sequence* seq, BlockPool& pool) {
  seq->table.release_all(pool);
  seq->block_hashes.clear();
  seq->n_computed = 0;
  seq->n_evicted = 0;
}

ScheduledChunk chunk_of(Sequence* seq, int32_t n) {
  // Drafts past the chunk's room are dropped by the engine before it runs;
  // the chunk then still ends at the sequence's last token.
  return {seq, n, std::min(seq->spec.n_draft, std::max(0, n - 1))};
}

}  // namespace

void Scheduler::remove(Sequence* seq, BlockPool& pool) {
  seq->table.release_all(pool);
  std::erase(running_, seq);
  std::erase(waiting_, seq);
}

void Scheduler::preempt(Sequence* seq, BlockPool& pool, SchedulerOutput& out) {
  reset_kv(seq, pool);
  ++seq->timings.n_preemptions;
  std::erase(running_, seq);
  waiting_.push_front(seq);
  out.preempted.push_back(seq);
}

void Scheduler::reuse_cached_prefix(Sequence* seq, BlockPool& pool) {
  // At least the last token is computed again: its logits are needed.
  const int32_t hit =
      match_cached_prefix(pool, seq->tokens, seq->size() - 1, seq->table, seq->block_hashes);
  seq->n_computed = hit;
}

bool Scheduler::make_room(Sequence* seq, int32_t n, BlockPool& pool, SchedulerOutput& out) {
  const int32_t begin = seq->cache_len();
  return seq->table.reserve(pool, begin + n) && seq->table.own_blocks(pool, begin, begin + n, out.copies);
}

bool Scheduler::has_slots(const Sequence* seq) const {
  const size_t want = running_.size() + 1 + static_cast<size_t>(seq->pending_choices);
  return running_.empty() || want <= static_cast<size_t>(config_.max_seqs);
}

int32_t Scheduler::chunk_size(const Sequence* seq, int32_t budget) const {
  const int32_t n = std::min(seq->n_pending(), budget);
  return config_.max_chunk_tokens > 0 ? std::min(n, config_.max_chunk_tokens) : n;
}

SchedulerOutput Scheduler::schedule(BlockPool& pool) {
  SchedulerOutput out;
  int32_t budget = config_.max_batch_tokens;

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int32_t n = chunk_size(seq, budget);
    bool fits = make_room(seq, n, pool, out);
    while (!fits && running_.back() != seq) {
      preempt(running_.back(), pool, out);
      fits = make_room(seq, n, pool, out);
    }
    if (!fits) {
      // Alone and still too big for the pool: it can never run.
      if (out.chunks.empty()) {
        out.unfittable.push_back(seq);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      preempt(seq, pool, out);
      break;
    }
    out.chunks.push_back(chunk_of(seq, n));
    budget -= n;
    ++i;
  }
  admit_waiting(pool, budget, out);
  return out;
}

void Scheduler::admit_waiting(BlockPool& pool, int32_t& budget, SchedulerOutput& out) {
  while (budget > 0 && !waiting_.empty() && has_slots(waiting_.front())) {
    Sequence* seq = waiting_.front();
    if (config_.prefix_caching) reuse_cached_prefix(seq, pool);
    const int32_t n = chunk_size(seq, budget);
    if (!make_room(seq, n, pool, out)) {
      // Waiting sequences hold no blocks: give the matched prefix back.
      reset_kv(seq, pool);
      if (running_.empty() && out.chunks.empty()) {
        waiting_.pop_front();
        out.unfittable.push_back(seq);
        continue;
      }
      return;
    }
    waiting_.pop_front();
    if (config_.prefix_caching && seq->timings.n_preemptions == 0) {
      seq->timings.n_cached = seq->n_computed;
      prefix_query_tokens_ += seq->n_prompt;
      prefix_hit_tokens_ += seq->n_computed;
    }
    running_.push_back(seq);
    out.chunks.push_back(chunk_of(seq, n));
    budget -= n;
  }
}

}  // namespace duet
