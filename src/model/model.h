// A loaded model: its file (weights memory-mapped in place), configuration,
// tokenizer, and the batched forward pass over the paged KV cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "formats/gguf.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "formats/model_config.h"
#include "model/matmul_observer.h"
#include "tokenizer/tokenizer.h"

namespace duet {

class Model {
 public:
  // Opens a GGUF file, validates config and every weight's shape and dtype.
  // `mode` chooses mapping or reading the file (core/mapped_file.h); a
  // Hugging Face folder is always mapped. With a communicator of more than
  // one rank (not owned; it must outlive the model) the model is this
  // rank's tensor-parallel shard (model/tensor_shard.h): config() and
  // kv_shape() then count this rank's heads and FFN width, forward() on
  // rank 0 announces each pass to the others (model/tp_step.h), and on the
  // others never writes logits: there a non-null pointer only asks for that
  // rank's rows of the vocabulary head, which rank 0 gathers.
  static Result<std::unique_ptr<Model>> load(const std::string& path, LoadMode mode = LoadMode::kMap,
                                             Communicator* comm = nullptr);
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return file_; }

  // Multi-head latent attention caches one row per token and layer, the
  // latent and the rotated shared key [c_kv | k_pe], as a keys-only cache.
  // Layers with a sliding window carry it, so the cache frees their blocks
  // behind it (kv/kv_groups.h).
  KvShape kv_shape() const {
    if (config_.mla()) return {config_.n_layers, 1, config_.latent_dim(), /*keys_only=*/true};
    KvShape s{config_.n_layers, config_.n_kv_heads, config_.head_dim};
    if (config_.sliding_window > 0)
      for (int32_t l = 0; l < config_.n_layers; ++l)
        s.layer_window.push_back(config_.layer_slides(l) ? config_.sliding_window : 0);
    return s;
  }
  // Bytes of weights one forward pass reads (all layers, the head, one
  // embedding row per token aside): what decode must stream from memory.
  virtual size_t weight_bytes_per_pass() const = 0;
  // FLOPs of the matrix products (2 per multiply-add) of one token through
  // every layer, and of one row of logits through the vocabulary head: a
  // prompt of n tokens costs n layer passes but one head row (only its last
  // position wants logits), a decode step one of each.
  virtual double layer_flops_per_token() const = 0;
  virtual double head_flops() const = 0;

  // Runs the batch: writes K/V of every row into the cache through its
  // sequence's block table, attends causally over each sequence's cache, and
  // writes logits [batch.n_logits()][n_vocab] for the rows that want them, in
  // row order (none when logits is nullptr). Fails (without touching the cache) on an out-of-range token.
  virtual Status forward(const Batch& batch, KvCache& cache, ThreadPool& pool,
                         float* logits) = 0;

  // The same pass without the vocabulary head: writes the final hidden
  // states (after the output norm) [batch.n_logits()][dim] of the rows that
  // want logits, in row order. What embeddings pool.
  virtual Status hidden_states(const Batch& batch, KvCache& cache, ThreadPool& pool, float* hidden) = 0;

  // Re-rotates the cached keys at positions [begin, end) of `table` as if
  // each had been written `delta` positions later (RoPE angles add), for a
  // window that has dropped earlier tokens and moved the rest down.
  virtual void shift_keys(KvCache& cache, const BlockTable& table, int32_t begin, int32_t end,
                          int32_t delta, ThreadPool& pool) = 0;

  // The context the caller runs with (tokens per sequence): models whose
  // RoPE depends on it (LongRoPE's short and long factors) choose here,
  // before any key is cached. Loading assumes the trained context.
  virtual void set_context(int32_t /*n_ctx*/) {}

  // Tokens routed to each expert since load, [layer][expert] (zero for
  // dense layers); empty for a model without experts. Safe to call while
  // another thread runs forward.
  virtual std::vector<uint64_t> expert_token_counts() const { return {}; }
  // Back to zero, so that a warm-up pass is not counted as routed work.
  virtual void reset_expert_token_counts() {}

  // Weights duet copied at load (packed matrices), and the file bytes those
  // copies stand for: resident after load should be the file less the
  // second plus the first, plus the KV cache (`duet bench` sets the measured
  // figure beside it).
  struct WeightCopies {
    size_t bytes = 0, file_bytes_replaced = 0;
  };
  virtual WeightCopies weight_copies() const { return {}; }

  // What loading chose that a user should know (e.g. weights left in the
  // mapped file for want of memory); empty when nothing.
  virtual std::string load_notes() const { return {}; }

  // Multi-head latent attention only: attend by decompressing every cached
  // latent into each head's K and V (naive, true) or over the latents
  // directly with the up-projections absorbed into q and the output (the
  // default). For tests and benchmarks of the two; a no-op elsewhere.
  virtual void set_mla_naive(bool /*naive*/) {}

  // Every later forward pass shows each matrix product's input to
  // `observer` (not owned; nullptr stops it).
  void set_matmul_observer(MatmulObserver* observer) { observer_ = observer; }

 protected:
  Model(GgufFile file, ModelConfig config, std::unique_ptr<Tokenizer> tokenizer)
      : file_(std::move(file)), config_(std::move(config)), tokenizer_(std::move(tokenizer)) {}

  GgufFile file_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  MatmulObserver* observer_ = nullptr;
};

}  // namespace duet
