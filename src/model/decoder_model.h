// The decoder's model class, shared by the files that implement it:
// decoder_load.cc (binding, tensor-parallel sharding, packing, RoPE
// tables), decoder.cc (the forward pass: a layer is attention_block then
// ffn_block), attention_block.cc, mla_block.cc and ffn_block.cc (the
// blocks). Internal to model/; the rest of duet sees Model (model.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/memory_info.h"
#include "formats/llama_names.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/packed_gemm.h"
#include "kernels/quant.h"
#include "kernels/type_kernels.h"
#include "model/decoder.h"
#include "model/moe.h"
#include "model/packed_weights.h"
#include "model/tensor_shard.h"
#include "model/tp_step.h"
#include "model/yarn_rope.h"

namespace duet {

// Activations for up to `capacity` rows; grown only when a larger batch arrives,
// so steady-state decode allocates nothing.
struct Workspace {
  int32_t capacity = 0;
  std::vector<float> x;      // [n][dim] residual stream
  std::vector<float> xn;     // [n][dim] normed input of a sub-block
  std::vector<float> q;      // [n][q_dim]
  std::vector<float> k;      // [n][kv_dim]
  std::vector<float> v;      // [n][kv_dim]
  std::vector<float> att;    // [n][q_dim] attention output
  std::vector<float> proj;   // [n][dim] output of wo / w_down
  std::vector<float> gate;   // [n][ffn]
  std::vector<float> up;     // [n][ffn]
  std::vector<float> router_logits;  // [n][n_experts]
  // Multi-head latent attention: q's bottleneck [n][q_lora], the latent rows
  // [n][kv_lora + rope], and per head the absorbed queries and their
  // attention outputs over the latents [n][heads][kv_lora + rope].
  std::vector<float> q_a, latent, mla_q, mla_att;
  // The naive path's decompressed keys and values of one sequence.
  std::vector<float> naive_lat, naive_c, naive_kv, naive_scores;
  std::vector<uint8_t> naive_scratch;
  std::vector<float> moe_y;  // [n * k][dim] the experts' outputs for them
  std::vector<MatmulItem> moe_items;
  ExpertRoutes routes;
  std::vector<uint8_t> scratch;  // activations converted to a weight's vec_dot_type
  std::vector<uint8_t> embd_row;  // a row of a packed (tied) embedding in file layout
  // Tensor parallelism: this rank's logits [m][its head rows], and on rank 0
  // every rank's, one rank after another.
  std::vector<float> head_part, head_all;
  std::vector<int32_t> attn_begin, attn_end;  // per row: the keys it attends
  std::vector<int32_t> attn_begin_local;      // the same under the sliding window
  std::vector<int32_t> attn_tiles;             // first row of each attention tile, then n
  int64_t attn_grain = 1;                      // (tile, KV head) jobs per parallel_for range
};

class DecoderModel final : public Model {
 public:
  DecoderModel(GgufFile file, ModelConfig config, std::unique_ptr<Tokenizer> tokenizer, Communicator* comm)
      : Model(std::move(file), std::move(config), std::move(tokenizer)),
        comm_(comm && comm->size() > 1 ? comm : nullptr) {}
  // Rank 0's model going away ends the run for the other ranks.
  ~DecoderModel() override {
    if (comm_ && comm_->leads()) lead_stop(*comm_);
  }

  Status bind();
  Status bind_rope();
  Status pack_matrices();
  size_t weight_bytes_per_pass() const override;
  double layer_flops_per_token() const override;
  // This rank's rows of the head (all of them in one process).
  double head_flops() const override { return 2.0 * config_.dim * static_cast<double>(output_->rows()); }
  Status forward(const Batch& batch, KvCache& cache, ThreadPool& pool, float* logits) override;
  Status hidden_states(const Batch& batch, KvCache& cache, ThreadPool& pool, float* hidden) override;
  void shift_keys(KvCache& cache, const BlockTable& table, int32_t begin, int32_t end,
                  int32_t delta, ThreadPool& pool) override;
  void set_context(int32_t n_ctx) override;

 private:
  Status shard_layers();
  Status shard_experts(LayerWeights& w);
  void shard_head();
  void absorb_mla();
  // Under tensor parallelism, proj [n][dim] holds this rank's partial sum
  // of an output projection: the sum over ranks is the whole product.
  void join_ranks(int32_t n) {
    if (comm_) comm_->allreduce_sum(ws_.proj.data(), static_cast<size_t>(n) * static_cast<size_t>(config_.dim));
  }
  const float* inv_freq(int layer) const {
    return config_.rope_base_local > 0.0f && config_.layer_slides(layer) ? inv_freq_local_.data() : inv_freq_.data();
  }
  Status check_batch(const Batch& batch, const KvCache& cache) const;
  // Every layer over the batch, then the output norm of the rows that want
  // logits into ws_.xn; returns how many rows that is. `to_head`: the pass
  // goes on to the vocabulary head (what rank 0 tells the other ranks).
  Result<int32_t> run_layers(const Batch& batch, KvCache& cache, ThreadPool& pool, bool to_head);
  void head(int32_t m, float* logits, ThreadPool& pool);
  void gather_logits(int32_t m, float* logits);
  void ensure_workspace(int32_t n);
  void embed(const Batch& batch);
  void plan_attention(const Batch& batch);
  void attention_block(int layer, const Batch& batch, KvCache& cache, ThreadPool& pool);
  void mla_attention_block(int layer, const Batch& batch, KvCache& cache, ThreadPool& pool);
  void mla_attend_absorbed(int layer, const Batch& batch, const KvCache& cache, ThreadPool& pool);
  void mla_attend_naive(int layer, const Batch& batch, const KvCache& cache, ThreadPool& pool);
  void set_mla_naive(bool naive) override { mla_naive_ = naive; }
  void ffn_block(int layer, int32_t n, ThreadPool& pool);
  void norm_rows(const TensorView* weight, int32_t n, ThreadPool& pool);
  void dense_ffn(const LayerWeights& w, int32_t n, ThreadPool& pool);
  void moe_ffn(int layer, int32_t n, ThreadPool& pool);
  void shared_expert(const LayerWeights& w, int32_t n, ThreadPool& pool);
  void observe_item(const MatmulItem& item);
  void glu_rows(float* gate, const float* up, int32_t n, size_t width, ThreadPool& pool);
  Status pack_experts(ExpertMatrices& m, int64_t rows_per_expert);
  std::vector<uint64_t> expert_token_counts() const override;
  void reset_expert_token_counts() override;
  WeightCopies weight_copies() const override { return {packed_.bytes(), packed_.source_bytes()}; }
  std::string load_notes() const override { return notes_.empty() ? shards_.notes() : notes_; }
  void add_residual(const TensorView* post_norm, int32_t n, ThreadPool& pool);
  void mm(const TensorView& w, const float* x, int32_t m, float* y, ThreadPool& pool) {
    if (observer_) observer_->observe(w, x, m);
    matmul(w, x, m, y, ws_.scratch.data(), pool);
  }
  // Matrices reading the same x (q, k, v; gate, up): quantized once.
  void mm_shared(std::initializer_list<const TensorView*> ws, const float* x, int32_t m,
                 std::initializer_list<float*> ys, ThreadPool& pool) {
    if (observer_)
      for (const TensorView* w : ws) observer_->observe(*w, x, m);
    matmul_shared(std::span(ws.begin(), ws.size()), x, m, std::span(ys.begin(), ys.size()), ws_.scratch.data(), pool);
  }

  const TensorView* embd_ = nullptr;         // [n_vocab rows][dim]
  const TensorView* output_norm_ = nullptr;  // [dim] f32
  const TensorView* output_ = nullptr;       // [n_vocab rows][dim]; the embedding when tied
  std::vector<RowRange> head_rows_;          // each rank's rows of output_ (tensor parallelism)
  std::vector<LayerWeights> layers_;
  std::vector<float> inv_freq_;              // [rope_dim/2]
  std::vector<float> inv_freq_local_;        // the sliding layers' (rope_base_local), or empty
  std::vector<float> inv_freq_short_, inv_freq_long_;  // LongRoPE's two tables, or empty
  std::deque<TensorView> slices_;            // row ranges of fused matrices and of shards
  Communicator* comm_ = nullptr;             // the ranks of a tensor-parallel run; null: one process
  ShardSlicer shards_;                       // this rank's column ranges and bias ranges
  PackedWeights packed_;
  Workspace ws_;
  // Multi-head latent attention: each layer's attn_kv_b in f32, as its key
  // rows W_UK [heads][nope][kv_lora] and its value rows transposed, W_UVᵀ
  // [heads][kv_lora][v], so that absorbing into q and out of the output are
  // both sums of rows times scalars (vector loops); and which path attends.
  std::vector<std::vector<float>> w_uk_, w_uv_t_;
  bool mla_naive_ = false;
  // Tokens routed to each expert since load, [layer][expert]: written by
  // the forward pass, read by metrics from other threads.
  std::unique_ptr<std::atomic<uint64_t>[]> expert_tokens_;
  std::string notes_;
};

// fn(i) for each of n rows of `width` floats, on the pool when the batch is
// large enough to pay for the wake-up (a prefill chunk, not a decode step).
template <class F>
void for_rows(ThreadPool& pool, int32_t n, size_t width, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((size_t{1} << 15) / std::max<size_t>(width, 1)));
  pool.parallel_for(n, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) fn(static_cast<int32_t>(i));
  });
}

}  // namespace duet
