// One embedding request on its way through the model: its inputs, each
// input's sum of pooled hidden states so far, and the inputs a pass has
// started but not finished. The Embedder runs it a pass at a time, so that
// the engine thread can run generation steps between its passes; an input
// longer than a pass keeps its KV blocks from its first pass to its last,
// and every other input holds none between passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "model/model.h"

namespace duet {

using Embeddings = std::vector<std::vector<float>>;  // [input][dim]

// Whether a pooling gives one vector per input (mean, cls and last do).
Status check_pooling(Pooling pooling);

class EmbeddingJob {
 public:
  // Inputs checked by the caller (Engine::check_embedding_input); blocks
  // come from and go back to `pool`.
  EmbeddingJob(std::vector<std::vector<int32_t>> inputs, Pooling pooling, int32_t dim, BlockPool& pool);
  // Gives back the blocks of inputs left part-run (a cancelled or failed job).
  ~EmbeddingJob();
  EmbeddingJob(const EmbeddingJob&) = delete;
  EmbeddingJob& operator=(const EmbeddingJob&) = delete;

  // An input a pass has started: its blocks and how far it has run.
  struct Open {
    size_t index;  // into inputs()
    BlockTable table;
    int32_t n_done = 0;
  };

  const std::vector<std::vector<int32_t>>& inputs() const { return inputs_; }
  Pooling pooling() const { return pooling_; }
  // Started inputs in order; a pass runs them first.
  std::vector<Open>& open() { return open_; }
  bool holds_blocks() const { return !open_.empty(); }
  bool done() const { return next_ == inputs_.size() && open_.empty(); }

  // Starts the next input if the pool has blocks for all of it now (an
  // input's blocks are taken whole, so that it cannot stall half-run).
  bool start_next();
  bool has_next() const { return next_ < inputs_.size(); }
  const std::vector<int32_t>& next_input() const { return inputs_[next_]; }
  // Whether pooling reads the hidden state at `position` of input `index`.
  bool wanted(size_t index, int32_t position) const;
  // Adds one wanted hidden state (dim floats) to its input's sum.
  void add(size_t index, const float* row);
  // Gives back the blocks of open inputs that have run to their end.
  void close_finished();
  // The vectors, pooled and L2-normalised; call once, when done().
  Embeddings take_vectors();

 private:
  std::vector<std::vector<int32_t>> inputs_;
  Pooling pooling_;
  BlockPool& pool_;
  Embeddings sums_;  // [input][dim]
  size_t next_ = 0;  // the first input not started
  std::vector<Open> open_;
};

}  // namespace duet
