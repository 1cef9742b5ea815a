// The execute stage: turns a SchedulerOutput into one flat batch, runs the
// model's forward pass over the paged cache, and hands back the logits rows
// of the sequences that sample this step (and of the choices forked off
// them, copies of their parent's row). It changes no sequence: advancing
// what each has computed is the update stage's job.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/scheduler_output.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"

namespace duet {

// The logits rows of one sampling sequence: one per draft token and one
// past the last (or just one without drafts).
struct SequenceLogits {
  Sequence* seq;
  size_t first_row;
  int32_t n_rows;
};

struct ModelOutput {
  int32_t n_vocab = 0;
  std::vector<SequenceLogits> sequences;  // in schedule order
  float* logits = nullptr;                // [rows][n_vocab]

  float* row(size_t r) const { return logits + r * static_cast<size_t>(n_vocab); }
};

class ModelRunner {
 public:
  ModelRunner(Model& model, KvCache& cache, ThreadPool& pool);

  // Runs every chunk of `plan`. The output stays valid until the next call.
  Result<ModelOutput> execute(const SchedulerOutput& plan);

  const Batch& last_batch() const { return batch_; }

 private:
  Model& model_;
  KvCache& cache_;
  ThreadPool& pool_;
  Batch batch_;               // reused every step
  std::vector<float> logits_;  // grows to the largest step
};

}  // namespace duet
