// Embeddings: each input's final hidden states (after the output norm, no
// vocabulary head) pooled into one L2-normalised vector. A job's inputs are
// prefilled together, in passes of up to max_batch_tokens rows (the
// scheduler's per-step budget), through the same paged cache as
// generation; the engine thread runs one pass at a time between its
// generation steps (engine/engine_loop.h), so a large request cannot stall
// streams. Each input's blocks are taken before its first pass and given
// back after its last; inputs share no prefix-cache blocks, since a cached
// prefix's hidden states are not kept.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/embedding_job.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"

namespace duet {

// Why embedding failed, for front ends that map it to their own codes: the
// cache has too few free blocks to hold an input now.
inline constexpr const char* kCacheFull = "kv_cache_full";

class Embedder {
 public:
  Embedder(Model& model, KvCache& cache, ThreadPool& pool, int32_t max_batch_tokens);

  // A job for run_pass() over inputs checked by the caller (non-empty, ids
  // in the vocabulary, within the context); pooling none and rank are
  // errors.
  Result<std::unique_ptr<EmbeddingJob>> start(std::vector<std::vector<int32_t>> inputs, Pooling pooling);
  // One forward pass of the job's next tokens, at most max_batch_tokens:
  // the inputs it left part-run first, then new ones in order while the
  // budget and the free blocks last. Returns the tokens run; fails (code
  // kCacheFull) when no input can run because the next one's blocks are
  // not free now.
  Result<int32_t> run_pass(EmbeddingJob& job);

 private:
  struct Span {
    size_t open;       // into job.open()
    int32_t first, n;  // positions [first, first + n) of the input run in this pass
  };
  // Fills batch_ with the job's next tokens; the spans say whose.
  std::vector<Span> plan_pass(EmbeddingJob& job);

  Model& model_;
  KvCache& cache_;
  ThreadPool& pool_;
  const int32_t max_batch_tokens_;
  Batch batch_;
  std::vector<float> hidden_;  // [wanted rows][dim]
};

}  // namespace duet
