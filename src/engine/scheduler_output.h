// What the scheduler decides for one step, as plain data: the first stage's
// output and the model runner's input (vLLM v1's SchedulerOutput).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sequence.h"

namespace duet {

struct ScheduledChunk {
  Sequence* seq;
  int32_t n_tokens;  // from seq->n_computed on, draft tokens included
  // Of those, draft tokens to verify: the last n_draft. Each needs its own
  // logits row, and they count as computed only once accepted.
  int32_t n_draft = 0;

  // The chunk runs up to the sequence's last token, so a token is sampled.
  bool samples() const { return seq->n_computed + n_tokens == seq->size(); }
  // Logits rows the chunk wants: one per draft and one past them, else one.
  int32_t n_logits() const { return samples() ? n_draft + 1 : 0; }
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  // Running sequences whose blocks were taken back this step; they wait to
  // be recomputed.
  std::vector<Sequence*> preempted;
  // Sequences that cannot fit in the block pool even alone: never run.
  std::vector<Sequence*> unfittable;
  // Shared blocks copied before the pass writes into them (copy-on-write).
  std::vector<BlockCopy> copies;
  // Choices forked this step from a sequence whose chunk completes its
  // prompt (RequestParams::n): each child holds its parent's blocks and
  // samples its first token from a copy of its parent's logits row.
  struct Fork {
    Sequence* parent;
    Sequence* child;
  };
  std::vector<Fork> forks;

  bool empty() const { return chunks.empty(); }
};

}  // namespace duet
