// Embeddings: each input's final hidden states (after the output norm, no
// vocabulary head) pooled into one L2-normalised vector. Inputs are
// prefilled together in batches of up to max_batch_tokens rows through the
// same paged cache as generation, in blocks taken for the pass and given
// back after it; they share no prefix-cache blocks, since a cached prefix's
// hidden states are not kept.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"

namespace duet {

using Embeddings = std::vector<std::vector<float>>;  // [input][dim]

// Why embedding failed, for front ends that map it to their own codes: the
// cache is too full of running requests to hold an input now.
inline constexpr const char* kCacheFull = "kv_cache_full";

class Embedder {
 public:
  Embedder(Model& model, KvCache& cache, ThreadPool& pool, int32_t max_batch_tokens);

  // Pools every input (checked by the caller: non-empty, ids in the
  // vocabulary, within the context). Pooling none and rank are errors.
  Result<Embeddings> embed(const std::vector<std::vector<int32_t>>& inputs, Pooling pooling);

 private:
  struct Input {
    size_t index;             // into the caller's inputs
    BlockTable table;
    int32_t n_done = 0;       // tokens already run
  };
  // Runs a group of inputs whose blocks are held, adding each wanted row's
  // hidden state into its input's vector.
  Status run_group(std::vector<Input>& group, const std::vector<std::vector<int32_t>>& inputs, Pooling pooling,
                   Embeddings& out);

  Model& model_;
  KvCache& cache_;
  ThreadPool& pool_;
  const int32_t max_batch_tokens_;
  Batch batch_;
  std::vector<float> hidden_;  // [wanted rows][dim]
};

}  // namespace duet
