#include "model/decoder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "formats/llama_names.h"
#include "kernels/attention.h"
#include "kernels/packed_gemm.h"
#include "kernels/quant.h"
#include "kernels/ops.h"
#include "kernels/type_kernels.h"
#include "core/memory_info.h"
#include "model/moe.h"
#include "model/packed_weights.h"
#include "model/yarn_rope.h"
#include "model/tensor_shard.h"
#include "model/tp_step.h"

namespace duet {
namespace {

namespace n = gguf_names;

void add_bias(float* y, const TensorView* bias, int32_t n, int32_t width) {
  if (!bias) return;
  const float* b = static_cast<const float*>(bias->data);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < width; ++j) y[static_cast<size_t>(i) * width + j] += b[j];
}

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

}  // namespace

namespace {

Status DecoderModel::bind() {
  const ModelConfig& c = config_;
  if (c.n_heads / c.n_kv_heads > 64)
    return err(file_.path(), ": more than 64 query heads per KV head is unsupported");
  if (comm_) DUET_TRY(check_shardable(c, comm_->size()));
  WeightBinder binder(file_, slices_);
  DUET_ASSIGN(embd_, binder.matrix(n::kTokenEmbd, c.dim, c.n_vocab));
  DUET_ASSIGN(output_norm_, binder.vector(n::kOutputNorm, c.dim));
  if (file_.tensor(n::kOutput)) {
    DUET_ASSIGN(output_, binder.matrix(n::kOutput, c.dim, c.n_vocab));
  } else {
    output_ = embd_;
    config_.tied_output = true;
  }
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights w{};
    DUET_TRY(bind_layer(binder, c, l, w));
    layers_.push_back(w);
  }
  if (c.moe()) {
    const size_t cells = static_cast<size_t>(c.n_layers) * static_cast<size_t>(c.n_experts);
    expert_tokens_ = std::make_unique<std::atomic<uint64_t>[]>(cells);
  }
  if (comm_) {
    DUET_TRY(shard_layers());
    shard_head();
  }
  if (c.mla()) absorb_mla();
  DUET_TRY(pack_matrices());
  return bind_rope();
}

// The per-head halves of attn_kv_b as F32 tables for the absorbed path
// (after sharding: this rank's heads).
void DecoderModel::absorb_mla() {
  const ModelConfig& c = config_;
  const auto kvl = static_cast<size_t>(c.kv_lora_rank), nope = static_cast<size_t>(c.nope_dim());
  const auto vd = static_cast<size_t>(c.v_head_dim), heads = static_cast<size_t>(c.n_heads);
  std::vector<float> row(kvl);
  for (const LayerWeights& w : layers_) {
    const TensorView& t = *w.wkv_b;
    std::vector<float>& uk = w_uk_.emplace_back(heads * nope * kvl);
    std::vector<float>& uv_t = w_uv_t_.emplace_back(heads * kvl * vd);
    for (size_t h = 0; h < heads; ++h)
      for (size_t r = 0; r < nope + vd; ++r) {
        type_kernels(t.dtype)->to_float(t.row(static_cast<int64_t>(h * (nope + vd) + r)), row.data(),
                                        static_cast<int64_t>(kvl));
        if (r < nope)
          std::copy(row.begin(), row.end(), &uk[(h * nope + r) * kvl]);
        else
          for (size_t j = 0; j < kvl; ++j) uv_t[(h * kvl + j) * vd + (r - nope)] = row[j];
      }
  }
}

// This rank's heads and FFN columns (model/tensor_shard.h) in place of the
// whole layers, before packing, so only the shard is packed and paged in;
// the config then counts this rank's heads and width, which is all the
// forward pass (and the KV cache's shape) needs to know.
Status DecoderModel::shard_layers() {
  const int r = comm_->rank(), ranks = comm_->size();
  WeightBinder binder(file_, slices_);
  // A column range touches every row's pages: once copied, the mapped
  // pages of the whole matrix go back. A bias splits as its matrix's rows.
  const auto shard = [&](Shard how, const TensorView*& t) -> Status {
    if (how == Shard::kRows && t->n_dims == 1) {
      const int64_t part = t->ne[0] / ranks;
      t = shards_.elements(t, r * part, part);
    } else if (how == Shard::kRows) {
      const int64_t part = t->rows() / ranks;
      t = binder.rows(*t, r * part, part);
    } else if (how == Shard::kColumns) {
      const TensorView* whole = t;
      const int64_t part = whole->ne[0] / ranks;
      DUET_ASSIGN(t, shards_.columns(*whole, r * part, part));
      file_.drop_pages(*whole);
    }
    return {};
  };
  // Latent attention: the latent's projections (wq_a, wkv_a) and norms are
  // whole on every rank, so each rank caches every token's latent; a head's
  // rows of attn_kv_b decompress it for that head alone.
  for (LayerWeights& w : layers_) {
    Status st;
    for_each_tensor(w, [&](const RoleField& f, const TensorView*& t) {
      if (st.ok()) st = shard(f.shard, t);
    });
    DUET_TRY(st);
    if (w.router) DUET_TRY(shard_experts(w));
  }
  config_.n_heads /= ranks;
  config_.n_kv_heads /= ranks;
  config_.ffn_dim /= ranks;
  config_.expert_ffn_dim /= ranks;
  config_.shared_expert_ffn_dim /= ranks;
  return {};
}

// This rank's rows of the vocabulary head: its logits go to rank 0, which
// gathers every rank's. A tied embedding stays the file's whole matrix for
// lookups (embed() converts a token's row in place), and only the head's
// rows are packed.
void DecoderModel::shard_head() {
  for (int r = 0; r < comm_->size(); ++r) head_rows_.push_back(head_rows(config_.n_vocab, r, comm_->size()));
  const RowRange mine = head_rows_[static_cast<size_t>(comm_->rank())];
  WeightBinder binder(file_, slices_);
  output_ = binder.rows(*output_, mine.first, mine.count);
}

// Each expert is split as a dense FFN is: this rank's rows of its gate and
// up, the matching columns of its down. The router stays whole, so every
// rank routes every token alike and reads 1/N of each active expert; the
// allreduce after the layer's FFN joins the experts' partial sums.
Status DecoderModel::shard_experts(LayerWeights& w) {
  const int r = comm_->rank(), ranks = comm_->size();
  const int64_t f = config_.expert_ffn_dim / ranks;
  WeightBinder binder(file_, slices_);
  for (ExpertMatrices* m : {&w.exp_gate, &w.exp_up}) {
    for (const TensorView*& e : m->experts) e = binder.rows(*e, r * f, f);
    m->stacked = nullptr;  // a rank's rows of every expert are no one range of the stack
  }
  ExpertMatrices& down = w.exp_down;
  const std::string name = down.experts[0]->name.substr(0, down.experts[0]->name.find('['));
  for (const TensorView*& e : down.experts) {
    const TensorView* whole = e;
    DUET_ASSIGN(e, shards_.block_columns(*whole, r * f, f, name));
    file_.drop_pages(*whole);
  }
  down.stacked = nullptr;
  return {};
}

// After bind: every matrix the int8 kernels can take packed is swapped for
// its packed copy. A tied head's packed copy serves the embedding too
// (embed() unpacks its rows), so the matrix is held once (a rank of a
// tensor-parallel run holds only its rows of the head: shard_head). The mapped pages
// of what was copied go back to the kernel a layer at a time, so the process
// holds the weights once (plus a layer while loading), not twice.
Status DecoderModel::pack_matrices() {
  auto pack = [&](std::vector<const TensorView**> slots) -> Status {
    std::vector<const TensorView*> sources;
    for (const TensorView** slot : slots) sources.push_back(*slot);
    DUET_TRY(packed_.pack(slots));
    for (size_t i = 0; i < slots.size(); ++i)
      if (*slots[i] != sources[i]) {
        file_.drop_pages(*sources[i]);
        shards_.release(sources[i]);
      }
    return {};
  };
  const bool tied = output_ == embd_;
  DUET_TRY(pack({&output_}));
  if (tied) embd_ = output_;
  // Experts that would not fit in memory as packed copies stay in the
  // mapped file: the kernel pages each in when a token routes to it.
  size_t expert_bytes = 0;
  for (const LayerWeights& w : layers_)
    for (const ExpertMatrices* m : {&w.exp_gate, &w.exp_up, &w.exp_down})
      for (const TensorView* t : m->experts) expert_bytes += packable(*t) ? packed_bytes(*t) : 0;
  const uint64_t room = available_memory_bytes();
  const bool experts_fit = expert_bytes < room / 10 * 9;
  if (!experts_fit)
    notes_ = "experts stay mapped from the file (" + std::to_string(expert_bytes >> 20) + " MiB packed would not fit in the " +
             std::to_string(room >> 20) + " MiB available): decode pages them in as tokens route to them";
  for (LayerWeights& w : layers_) {
    std::vector<const TensorView**> slots;
    // attn_kv_b stays as the file has it: the naive MLA path multiplies by
    // it, the absorbed one reads its f32 copy.
    for_each_tensor(w, [&](const RoleField& f, const TensorView*& t) {
      if (f.packed) slots.push_back(&t);
    });
    DUET_TRY(pack(slots));
    if (!w.router || !experts_fit) continue;
    DUET_TRY(pack_experts(w.exp_gate, config_.expert_ffn_dim));
    DUET_TRY(pack_experts(w.exp_up, config_.expert_ffn_dim));
    DUET_TRY(pack_experts(w.exp_down, config_.dim));
  }
  return {};
}

// A stacked tensor is packed whole (one buffer, not one per expert) and its
// experts re-sliced from the copy, when each expert is whole 16-row groups.
Status DecoderModel::pack_experts(ExpertMatrices& m, int64_t rows_per_expert) {
  if (m.stacked && rows_per_expert % kPackRows == 0) {
    const TensorView* file_copy = m.stacked;
    DUET_TRY(packed_.pack(std::span<const TensorView** const>(std::vector<const TensorView**>{&m.stacked})));
    if (m.stacked == file_copy) return {};
    file_.drop_pages(*file_copy);
    WeightBinder binder(file_, slices_);
    for (size_t e = 0; e < m.experts.size(); ++e)
      m.experts[e] = binder.rows(*m.stacked, static_cast<int64_t>(e) * rows_per_expert, rows_per_expert);
    return {};
  }
  std::vector<const TensorView**> slots;
  std::vector<const TensorView*> sources(m.experts.begin(), m.experts.end());
  for (const TensorView*& e : m.experts) slots.push_back(&e);
  DUET_TRY(packed_.pack(slots));
  for (size_t e = 0; e < sources.size(); ++e)
    if (m.experts[e] != sources[e]) {
      file_.drop_pages(*sources[e]);
      shards_.release(sources[e]);
    }
  return {};
}

// The inverse frequencies of RoPE pairs for one base: scaled linearly and by
// per-dimension divisors where given.
std::vector<float> rope_inv_freq(int rope_dim, double base, double linear_factor, const float* divisors) {
  std::vector<float> inv(static_cast<size_t>(rope_dim / 2));
  for (int i = 0; i < rope_dim / 2; ++i) {
    double f = std::pow(base, -2.0 * i / rope_dim) / linear_factor;
    if (divisors) f /= divisors[i];
    inv[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return inv;
}

Status DecoderModel::bind_rope() {
  const ModelConfig& c = config_;
  const int half = c.rope_dim / 2;
  const float* freq_divisors = nullptr;  // Llama 3.1-style per-dimension scaling
  const WeightBinder binder(file_, slices_);
  if (file_.tensor(n::kRopeFreqs)) {
    DUET_ASSIGN(const TensorView* t, binder.vector(n::kRopeFreqs, half));
    freq_divisors = static_cast<const float*>(t->data);
    for (int i = 0; i < half; ++i)
      if (!(freq_divisors[i] > 0.0f))
        return err(file_.path(), ": ", n::kRopeFreqs, "[", i, "] = ", freq_divisors[i], " must be positive");
  }
  inv_freq_ = c.yarn.factor > 0.0f ? yarn_inv_freq(c.rope_dim, c.rope_base, c.yarn)
                                   : rope_inv_freq(c.rope_dim, c.rope_base, c.rope_linear_factor, freq_divisors);
  if (c.rope_orig_ctx > 0) {
    for (auto [name, table] : {std::pair{&n::kRopeFactorsShort, &inv_freq_short_}, {&n::kRopeFactorsLong, &inv_freq_long_}}) {
      DUET_ASSIGN(const TensorView* t, binder.vector(*name, half));
      const auto* div = static_cast<const float*>(t->data);
      for (int i = 0; i < half; ++i)
        if (!(div[i] > 0.0f)) return err(file_.path(), ": ", *name, "[", i, "] = ", div[i], " must be positive");
      *table = rope_inv_freq(c.rope_dim, c.rope_base, c.rope_linear_factor, div);
    }
    set_context(c.ctx_len);
  }
  if (c.rope_base_local > 0.0f) inv_freq_local_ = rope_inv_freq(c.rope_dim, c.rope_base_local, 1.0, nullptr);
  return {};
}

// LongRoPE: the short factors serve contexts up to the original one, the
// long factors longer ones (chosen once per context, as llama.cpp does,
// so cached keys never mix the two).
void DecoderModel::set_context(int32_t n_ctx) {
  if (inv_freq_long_.empty()) return;
  inv_freq_ = n_ctx > config_.rope_orig_ctx ? inv_freq_long_ : inv_freq_short_;
}

// Of a mixture of experts, a token reads its n_experts_used experts: the
// average share of the experts' bytes (what decode streams per token).
size_t DecoderModel::weight_bytes_per_pass() const {
  size_t bytes = output_->nbytes + output_norm_->nbytes;
  for (const LayerWeights& w : layers_) {
    for_each_tensor(w, [&](const RoleField&, const TensorView* t) { bytes += t->nbytes; });
    size_t experts = 0;
    for (const ExpertMatrices* m : {&w.exp_gate, &w.exp_up, &w.exp_down})
      for (const TensorView* t : m->experts) experts += t->nbytes;
    if (w.router) bytes += experts / static_cast<size_t>(config_.n_experts) * static_cast<size_t>(config_.n_experts_used);
  }
  return bytes;
}

double DecoderModel::layer_flops_per_token() const {
  const ModelConfig& c = config_;
  // Latent attention: q (through its bottleneck), the latent, q and the
  // output absorbed through attn_kv_b, and the output projection.
  const double attention =
      c.mla() ? (c.q_lora_rank > 0 ? static_cast<double>(c.q_lora_rank) * (c.dim + c.q_dim()) : static_cast<double>(c.dim) * c.q_dim()) +
                    static_cast<double>(c.dim) * c.latent_dim() +
                    static_cast<double>(c.n_heads) * c.kv_lora_rank * (c.nope_dim() + c.v_head_dim) +
                    static_cast<double>(c.n_heads) * c.v_head_dim * c.dim
              : static_cast<double>(c.dim) * (c.q_dim() + 2.0 * c.kv_dim()) + static_cast<double>(c.q_dim()) * c.dim;
  double per_pass = 0.0;
  for (const LayerWeights& w : layers_)
    per_pass += attention + (w.router ? static_cast<double>(c.dim) * (c.n_experts + 3.0 * c.expert_ffn_dim * c.n_experts_used +
                                                                      3.0 * c.shared_expert_ffn_dim + (w.shared_router ? 1 : 0))
                                      : 3.0 * c.dim * c.ffn_dim);
  return 2.0 * per_pass;
}

std::vector<uint64_t> DecoderModel::expert_token_counts() const {
  if (!expert_tokens_) return {};
  std::vector<uint64_t> counts(static_cast<size_t>(config_.n_layers) * static_cast<size_t>(config_.n_experts));
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = expert_tokens_[i].load(std::memory_order_relaxed);
  return counts;
}

void DecoderModel::reset_expert_token_counts() {
  if (!expert_tokens_) return;
  for (size_t i = 0, n = static_cast<size_t>(config_.n_layers) * static_cast<size_t>(config_.n_experts); i < n; ++i)
    expert_tokens_[i].store(0, std::memory_order_relaxed);
}

Status DecoderModel::check_batch(const Batch& batch, const KvCache& cache) const {
  for (int32_t i = 0; i < batch.size(); ++i) {
    const int32_t tok = batch.tokens[static_cast<size_t>(i)];
    if (tok < 0 || tok >= config_.n_vocab)
      return err("token id ", tok, " is out of range (vocabulary has ", config_.n_vocab, ")");
    const int32_t s = batch.seq[static_cast<size_t>(i)];
    if (s < 0 || s >= static_cast<int32_t>(batch.tables.size()))
      return err("batch row ", i, " names sequence ", s, " of ", batch.tables.size());
    const BlockTable& table = *batch.tables[static_cast<size_t>(s)];
    const int32_t pos = batch.positions[static_cast<size_t>(i)];
    if (pos < 0 || pos >= table.capacity())
      return err("batch row ", i, " has position ", pos, " outside its ", table.capacity(),
                 " reserved KV slots");
    for (const std::vector<int32_t>& blocks : table.groups)
      if (blocks[static_cast<size_t>(pos / kBlockTokens)] == kNoBlock)
        return err("batch row ", i, " has position ", pos, " in a released KV block");
  }
  // A negative id marks a block a sliding window has already released.
  for (const BlockTable* table : batch.tables) {
    if (table->n_groups() != cache.groups().n_groups())
      return err("a block table has ", table->n_groups(), " groups of layers; the cache has ",
                 cache.groups().n_groups());
    for (const std::vector<int32_t>& blocks : table->groups) {
      if (blocks.size() != table->blocks().size())
        return err("a block table's groups of layers differ in length");
      for (int32_t b : blocks)
        if (b >= cache.pool().n_blocks())
          return err("block table names block ", b, " of ", cache.pool().n_blocks());
    }
  }
  for (const BlockCopy& c : batch.copies)
    if (c.src < 0 || c.dst < 0 || c.src >= cache.pool().n_blocks() || c.dst >= cache.pool().n_blocks())
      return err("block copy ", c.src, " -> ", c.dst, " names a block outside the ", cache.pool().n_blocks());
  return {};
}

void DecoderModel::ensure_workspace(int32_t n) {
  if (n <= ws_.capacity) return;
  const ModelConfig& c = config_;
  const auto un = static_cast<size_t>(n);
  ws_.x.resize(un * c.dim);
  ws_.xn.resize(un * c.dim);
  ws_.q.resize(un * c.q_dim());
  ws_.k.resize(un * c.kv_dim());
  ws_.v.resize(un * c.kv_dim());
  ws_.att.resize(un * std::max(c.q_dim(), c.n_heads * c.v_head_dim));
  if (c.mla()) {
    ws_.q_a.resize(un * static_cast<size_t>(c.q_lora_rank));
    ws_.latent.resize(un * static_cast<size_t>(c.latent_dim()));
    ws_.mla_q.resize(un * static_cast<size_t>(c.n_heads) * c.latent_dim());
    ws_.mla_att.resize(ws_.mla_q.size());
  }
  ws_.proj.resize(un * c.dim);
  const size_t routed = un * static_cast<size_t>(std::max(c.n_experts_used, 1));  // rows over all experts
  const size_t ffn = std::max({un * c.ffn_dim, routed * c.expert_ffn_dim, un * c.shared_expert_ffn_dim});
  ws_.gate.resize(ffn);
  ws_.up.resize(ffn);
  if (c.moe()) {
    ws_.router_logits.resize(un * c.n_experts);
    ws_.moe_y.resize(routed * c.dim);
  }
  size_t scratch = activation_scratch_bytes(*output_, n);
  for (const LayerWeights& w : layers_) {
    // The matrices the step multiplies by (attn_kv_b's paths keep their own scratch).
    for_each_tensor(w, [&](const RoleField& f, const TensorView* t) {
      if (f.packed || f.role == Role::kSharedRouter) scratch = std::max(scratch, activation_scratch_bytes(*t, n));
    });
    for (const ExpertMatrices* m : {&w.exp_gate, &w.exp_down})
      if (!m->experts.empty())
        scratch = std::max(scratch, grouped_scratch_bytes(*m->experts[0], static_cast<int64_t>(routed), n));
  }
  ws_.scratch.resize(scratch);
  ws_.capacity = n;
}

void DecoderModel::embed(const Batch& batch) {
  const DType row_type = embd_->dtype;
  const TypeKernels* k = type_kernels(row_type);
  if (embd_->packed) ws_.embd_row.resize(*row_bytes(row_type, config_.dim));
  for (int32_t i = 0; i < batch.size(); ++i) {
    const int32_t tok = batch.tokens[static_cast<size_t>(i)];
    const uint8_t* row = embd_->packed ? ws_.embd_row.data() : embd_->row(tok);
    if (embd_->packed) unpack_row(*embd_, tok, ws_.embd_row.data());
    k->to_float(row, ws_.x.data() + static_cast<size_t>(i) * config_.dim, config_.dim);
  }
  if (config_.embed_scale != 1.0f)
    for (size_t j = 0; j < static_cast<size_t>(batch.size()) * config_.dim; ++j) ws_.x[j] *= config_.embed_scale;
}

// LongRoPE's attention factor multiplies the rotated dims of each head (its
// cosines and sines), not the dims RoPE passes through.
void scale_rotated(float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, float factor) {
  for (int32_t h = 0; h < n_heads; ++h)
    for (int32_t d = 0; d < rope_dim; ++d) x[h * head_dim + d] *= factor;
}

// fn(i) for each of n rows of `width` floats, on the pool when the batch is
// large enough to pay for the wake-up (a prefill chunk, not a decode step).
template <class F>
void for_rows(ThreadPool& pool, int32_t n, size_t width, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((size_t{1} << 15) / std::max<size_t>(width, 1)));
  pool.parallel_for(n, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) fn(static_cast<int32_t>(i));
  });
}

// xn = RMSNorm(x) * weight over the batch's n rows; xn = x where the layer
// has no norm there (OLMo 2 norms outputs, not inputs).
void DecoderModel::norm_rows(const TensorView* weight, int32_t n, ThreadPool& pool) {
  const size_t dim = static_cast<size_t>(config_.dim);
  if (!weight) {
    std::copy_n(ws_.x.begin(), static_cast<size_t>(n) * dim, ws_.xn.begin());
    return;
  }
  for_rows(pool, n, dim, [&](int32_t i) {
    rmsnorm(&ws_.x[i * dim], static_cast<const float*>(weight->data), &ws_.xn[i * dim], config_.dim, config_.rms_eps);
  });
}

// Each row's key range, and tiles of consecutive rows of one sequence (a
// prefill chunk's): the rows of a tile share each block of K/V they read.
// The same for every layer, so planned once per forward pass.
void DecoderModel::plan_attention(const Batch& batch) {
  const ModelConfig& c = config_;
  const int32_t n = batch.size();
  ws_.attn_begin.resize(static_cast<size_t>(n));
  ws_.attn_end.resize(static_cast<size_t>(n));
  ws_.attn_begin_local.resize(static_cast<size_t>(n));
  ws_.attn_tiles.clear();
  int64_t keys = 0;
  const int32_t tile_rows = attn_tile_rows(c.n_heads / std::max(c.n_kv_heads, 1));
  for (int32_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    ws_.attn_end[u] = batch.positions[u] + 1;
    ws_.attn_begin[u] = 0;
    ws_.attn_begin_local[u] = c.sliding_window > 0 ? std::max(0, ws_.attn_end[u] - c.sliding_window) : 0;
    keys += ws_.attn_end[u];
    const bool joins = i > 0 && batch.seq[u] == batch.seq[u - 1] && batch.positions[u] == batch.positions[u - 1] + 1 &&
                       i - ws_.attn_tiles.back() < tile_rows;
    if (!joins) ws_.attn_tiles.push_back(i);
  }
  const auto n_tiles = static_cast<int64_t>(ws_.attn_tiles.size());
  ws_.attn_tiles.push_back(n);
  // Jobs are (tile, KV head) pairs; batch them so each range is worth a
  // thread wake-up (~64K multiply-adds), which keeps tiny models on one thread.
  const int64_t work_per_job = std::max<int64_t>(1, keys / n_tiles * (c.n_heads / c.n_kv_heads) * c.head_dim * 2);
  ws_.attn_grain = std::max<int64_t>(1, (int64_t{1} << 16) / work_per_job);
}

void DecoderModel::attention_block(int layer, const Batch& batch, KvCache& cache, ThreadPool& pool) {
  if (config_.mla()) return mla_attention_block(layer, batch, cache, pool);
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  const int32_t n = batch.size();
  norm_rows(w.attn_norm, n, pool);
  mm_shared({w.wq, w.wk, w.wv}, ws_.xn.data(), n, {ws_.q.data(), ws_.k.data(), ws_.v.data()}, pool);
  add_bias(ws_.q.data(), w.bq, n, c.q_dim());
  add_bias(ws_.k.data(), w.bk, n, c.kv_dim());
  add_bias(ws_.v.data(), w.bv, n, c.kv_dim());
  if (w.q_norm) {
    const auto* qn = static_cast<const float*>(w.q_norm->data);
    const auto* kn = static_cast<const float*>(w.k_norm->data);
    // Each norm runs over spans of its weight's length: one head (Qwen3,
    // Gemma 3), or all of them (OLMo), as the binders sized it.
    const auto q_span = static_cast<int32_t>(w.q_norm->ne[0]);
    const auto k_span = static_cast<int32_t>(w.k_norm->ne[0]);
    for_rows(pool, n, static_cast<size_t>(c.q_dim() + c.kv_dim()), [&](int32_t i) {
      float* q = &ws_.q[static_cast<size_t>(i) * c.q_dim()];
      float* k = &ws_.k[static_cast<size_t>(i) * c.kv_dim()];
      for (int32_t at = 0; at < c.q_dim(); at += q_span) rmsnorm(q + at, qn, q + at, q_span, c.rms_eps);
      for (int32_t at = 0; at < c.kv_dim(); at += k_span) rmsnorm(k + at, kn, k + at, k_span, c.rms_eps);
    });
  }

  const size_t q_dim = static_cast<size_t>(c.q_dim()), kv_dim = static_cast<size_t>(c.kv_dim());
  const size_t hd = static_cast<size_t>(c.head_dim);
  // Rows write distinct cache slots: they may go in parallel.
  for_rows(pool, n, q_dim + 2 * kv_dim, [&](int32_t i) {
    const int32_t pos = batch.positions[static_cast<size_t>(i)];
    const auto rotate = c.rope_layout == RopeLayout::kNeox ? rope_neox : rope;
    rotate(&ws_.q[i * q_dim], c.n_heads, c.head_dim, c.rope_dim, pos, inv_freq(layer));
    rotate(&ws_.k[i * kv_dim], c.n_kv_heads, c.head_dim, c.rope_dim, pos, inv_freq(layer));
    if (c.rope_attn_factor != 1.0f) {
      scale_rotated(&ws_.q[i * q_dim], c.n_heads, c.head_dim, c.rope_dim, c.rope_attn_factor);
      scale_rotated(&ws_.k[i * kv_dim], c.n_kv_heads, c.head_dim, c.rope_dim, c.rope_attn_factor);
    }
    // Every row's K/V goes into the cache before any row attends, so rows
    // of one sequence in this batch see each other causally.
    const BlockTable& table = *batch.tables[static_cast<size_t>(batch.seq[static_cast<size_t>(i)])];
    const int32_t block = cache.blocks_of(table, layer)[static_cast<size_t>(pos / kBlockTokens)];
    cache.store(layer, block, pos % kBlockTokens, &ws_.k[i * kv_dim], &ws_.v[i * kv_dim]);
  });

  const int32_t group = c.n_heads / c.n_kv_heads;
  const AttnScale scale{c.attn_scale(), c.attn_softcap};
  const std::vector<int32_t>& begins = c.layer_slides(layer) ? ws_.attn_begin_local : ws_.attn_begin;
  const size_t block_stride = cache.block_stride();
  if (n == 1) {
    // One decode row: its keys split over the threads, every KV head at once.
    const BlockTable& table = *batch.tables[static_cast<size_t>(batch.seq[0])];
    const PagedKv kv{cache.key_data(layer, 0, 0), cache.value_data(layer, 0, 0), block_stride,
                     cache.blocks_of(table, layer).data(), kBlockTokens, cache.type(), cache.scales_offset()};
    attend_paged_decode(pool, ws_.q.data(), c.n_kv_heads, group, c.head_dim, kv, cache.head_stride(), begins[0],
                        ws_.attn_end[0], scale, ws_.att.data());
  } else {
    const auto n_tiles = static_cast<int64_t>(ws_.attn_tiles.size()) - 1;
    pool.parallel_for(n_tiles * c.n_kv_heads, ws_.attn_grain, [&](int64_t begin, int64_t end) {
      for (int64_t job = begin; job < end; ++job) {
        const auto tile = static_cast<size_t>(job / c.n_kv_heads);
        const int32_t h = static_cast<int32_t>(job % c.n_kv_heads);
        const int32_t r0 = ws_.attn_tiles[tile], rows = ws_.attn_tiles[tile + 1] - r0;
        const auto i = static_cast<size_t>(r0);
        const BlockTable& table = *batch.tables[static_cast<size_t>(batch.seq[i])];
        const PagedKv kv{cache.key_data(layer, 0, h), cache.value_data(layer, 0, h), block_stride,
                         cache.blocks_of(table, layer).data(), kBlockTokens, cache.type(), cache.scales_offset()};
        const size_t q_off = i * q_dim + static_cast<size_t>(h) * group * hd;
        attend_paged_rows(&ws_.q[q_off], q_dim, rows, group, c.head_dim, kv, &begins[i], &ws_.attn_end[i], scale,
                          &ws_.att[q_off], q_dim);
      }
    });
  }

  mm(*w.wo, ws_.att.data(), n, ws_.proj.data(), pool);
  join_ranks(n);
  add_residual(w.post_attn_norm, n, pool);
}

// Multi-head latent attention (DeepSeek-V2). Each token's latent row
// [c_kv | k_pe] = [RMSNorm(x · W_kv_a[:kv_lora]) | RoPE(x · W_kv_a[kv_lora:])]
// is all that goes into the cache (one keys-only "head" of kv_lora + rope
// dims). Head h's key is [W_UK_h · c_kv | k_pe] and its value W_UV_h · c_kv
// (W_UK_h, W_UV_h: its rows of attn_kv_b), its query [q_nope | RoPE(q_pe)].
void DecoderModel::mla_attention_block(int layer, const Batch& batch, KvCache& cache, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  const int32_t n = batch.size();
  norm_rows(w.attn_norm, n, pool);
  if (w.wq_a) {
    mm_shared({w.wq_a, w.wkv_a}, ws_.xn.data(), n, {ws_.q_a.data(), ws_.latent.data()}, pool);
    const size_t ql = static_cast<size_t>(c.q_lora_rank);
    for_rows(pool, n, ql, [&](int32_t i) {
      rmsnorm(&ws_.q_a[i * ql], static_cast<const float*>(w.q_a_norm->data), &ws_.q_a[i * ql], c.q_lora_rank, c.rms_eps);
    });
    mm(*w.wq, ws_.q_a.data(), n, ws_.q.data(), pool);
  } else {
    mm_shared({w.wq, w.wkv_a}, ws_.xn.data(), n, {ws_.q.data(), ws_.latent.data()}, pool);
  }
  const size_t q_dim = static_cast<size_t>(c.q_dim()), lat = static_cast<size_t>(c.latent_dim());
  const auto rotate = c.rope_layout == RopeLayout::kNeox ? rope_neox : rope;
  for_rows(pool, n, q_dim + lat, [&](int32_t i) {
    const int32_t pos = batch.positions[static_cast<size_t>(i)];
    float* kv = &ws_.latent[i * lat];
    rmsnorm(kv, static_cast<const float*>(w.kv_a_norm->data), kv, c.kv_lora_rank, c.rms_eps);
    rotate(&ws_.q[i * q_dim] + c.nope_dim(), c.n_heads, c.head_dim, c.rope_dim, pos, inv_freq(layer));
    rotate(kv + c.kv_lora_rank, 1, c.rope_dim, c.rope_dim, pos, inv_freq(layer));
    const BlockTable& table = *batch.tables[static_cast<size_t>(batch.seq[static_cast<size_t>(i)])];
    const int32_t block = cache.blocks_of(table, layer)[static_cast<size_t>(pos / kBlockTokens)];
    cache.store(layer, block, pos % kBlockTokens, kv, nullptr);
  });
  if (mla_naive_)
    mla_attend_naive(layer, batch, cache, pool);
  else
    mla_attend_absorbed(layer, batch, cache, pool);
  mm(*w.wo, ws_.att.data(), n, ws_.proj.data(), pool);
  join_ranks(n);
  add_residual(w.post_attn_norm, n, pool);
}

float dot_f32(const float* a, const float* b, size_t n) {
  float s = 0.0f;
  for (size_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

// Attention over the cached latents themselves: head h's query becomes
// [W_UK_hᵀ q_nope | q_pe] (q_nope · W_UK_h c = (W_UK_hᵀ q_nope) · c), every
// head attends the one shared latent row per token (MQA, the latent's
// c_kv part also serving as the value), and the head's output in latent
// space goes through W_UV_h. The cache is read once for all heads and no
// per-head K or V is ever formed.
void DecoderModel::mla_attend_absorbed(int layer, const Batch& batch, const KvCache& cache, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int32_t n = batch.size(), heads = c.n_heads;
  const size_t q_dim = static_cast<size_t>(c.q_dim()), lat = static_cast<size_t>(c.latent_dim());
  const size_t kvl = static_cast<size_t>(c.kv_lora_rank), nope = static_cast<size_t>(c.nope_dim());
  const size_t vd = static_cast<size_t>(c.v_head_dim), hd = static_cast<size_t>(c.head_dim);
  const float* uk = w_uk_[static_cast<size_t>(layer)].data();
  const float* uv_t = w_uv_t_[static_cast<size_t>(layer)].data();
  const int64_t jobs = static_cast<int64_t>(n) * heads;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / static_cast<int64_t>(kvl * (nope + vd)));
  pool.parallel_for(jobs, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t job = lo; job < hi; ++job) {
      const auto i = static_cast<size_t>(job / heads), h = static_cast<size_t>(job % heads);
      const float* q = &ws_.q[i * q_dim + h * hd];
      float* out = &ws_.mla_q[(i * heads + h) * lat];
      std::fill_n(out, kvl, 0.0f);
      for (size_t r = 0; r < nope; ++r) {
        const float a = q[r];
        const float* row = uk + (h * nope + r) * kvl;
        for (size_t j = 0; j < kvl; ++j) out[j] += a * row[j];
      }
      std::copy(q + nope, q + hd, out + kvl);
    }
  });
  // Jobs are (tile, group of heads): the groups of a tile read the same
  // latents, and a decode step still spreads over the threads.
  const int32_t group = std::min<int32_t>(heads, std::max<int32_t>(1, heads / std::max(1, pool.size())));
  const int32_t n_groups = (heads + group - 1) / group;
  const auto n_tiles = static_cast<int64_t>(ws_.attn_tiles.size()) - 1;
  const AttnScale scale{c.attn_scale(), c.attn_softcap};
  const size_t row_stride = static_cast<size_t>(heads) * lat;
  pool.parallel_for(n_tiles * n_groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const auto tile = static_cast<size_t>(job / n_groups);
      const int32_t h0 = static_cast<int32_t>(job % n_groups) * group;
      const int32_t g = std::min(group, heads - h0);
      const int32_t r0 = ws_.attn_tiles[tile], rows = ws_.attn_tiles[tile + 1] - r0;
      const auto i = static_cast<size_t>(r0);
      const BlockTable& table = *batch.tables[static_cast<size_t>(batch.seq[i])];
      const PagedKv kv{cache.key_data(layer, 0, 0), cache.value_data(layer, 0, 0), cache.block_stride(),
                       cache.blocks_of(table, layer).data(), kBlockTokens, cache.type(), cache.scales_offset()};
      const size_t off = i * row_stride + static_cast<size_t>(h0) * lat;
      attend_paged_rows(&ws_.mla_q[off], row_stride, rows, g, c.latent_dim(), kv, &ws_.attn_begin[i],
                        &ws_.attn_end[i], scale, &ws_.mla_att[off], row_stride);
    }
  });
  const size_t att_stride = static_cast<size_t>(heads) * vd;
  pool.parallel_for(jobs, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t job = lo; job < hi; ++job) {
      const auto i = static_cast<size_t>(job / heads), h = static_cast<size_t>(job % heads);
      const float* o = &ws_.mla_att[(i * heads + h) * lat];  // its first kv_lora dims: the latent value
      float* out = &ws_.att[i * att_stride + h * vd];
      std::fill_n(out, vd, 0.0f);
      for (size_t j = 0; j < kvl; ++j) {
        const float a = o[j];
        const float* row = uv_t + (h * kvl + j) * vd;
        for (size_t r = 0; r < vd; ++r) out[r] += a * row[r];
      }
    }
  });
}

// The reference path: per sequence, every cached latent is decompressed
// into each head's K_nope and V (one matrix product by attn_kv_b), and the
// heads attend those as ordinary multi-head attention would.
void DecoderModel::mla_attend_naive(int layer, const Batch& batch, const KvCache& cache, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  const int32_t heads = c.n_heads;
  const size_t q_dim = static_cast<size_t>(c.q_dim()), lat = static_cast<size_t>(c.latent_dim());
  const size_t kvl = static_cast<size_t>(c.kv_lora_rank), nope = static_cast<size_t>(c.nope_dim());
  const size_t vd = static_cast<size_t>(c.v_head_dim), hd = static_cast<size_t>(c.head_dim);
  const size_t kv_width = static_cast<size_t>(heads) * (nope + vd);
  const float scale = c.attn_scale();
  const auto n_tiles = ws_.attn_tiles.size() - 1;
  for (size_t tile = 0; tile < n_tiles; ++tile) {
    const int32_t r0 = ws_.attn_tiles[tile], r1 = ws_.attn_tiles[tile + 1];
    int32_t keys = 0;
    for (int32_t i = r0; i < r1; ++i) keys = std::max(keys, ws_.attn_end[static_cast<size_t>(i)]);
    const auto uk = static_cast<size_t>(keys);
    const BlockTable& table = *batch.tables[static_cast<size_t>(batch.seq[static_cast<size_t>(r0)])];
    ws_.naive_lat.resize(uk * lat);
    ws_.naive_c.resize(uk * kvl);
    ws_.naive_kv.resize(uk * kv_width);
    for (size_t p = 0; p < uk; ++p) {
      const int32_t block = cache.blocks_of(table, layer)[p / kBlockTokens];
      cache.load_key(layer, block, 0, static_cast<int32_t>(p % kBlockTokens), &ws_.naive_lat[p * lat]);
      std::copy_n(&ws_.naive_lat[p * lat], kvl, &ws_.naive_c[p * kvl]);
    }
    ws_.naive_scratch.resize(std::max(ws_.naive_scratch.size(), activation_scratch_bytes(*w.wkv_b, keys)));
    matmul(*w.wkv_b, ws_.naive_c.data(), keys, ws_.naive_kv.data(), ws_.naive_scratch.data(), pool);
    const int64_t jobs = static_cast<int64_t>(r1 - r0) * heads;
    pool.parallel_for(jobs, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> score(uk), acc(vd);
      for (int64_t job = lo; job < hi; ++job) {
        const auto i = static_cast<size_t>(r0 + job / heads), h = static_cast<size_t>(job % heads);
        const float* q = &ws_.q[i * q_dim + h * hd];
        const auto b = static_cast<size_t>(ws_.attn_begin[i]), e = static_cast<size_t>(ws_.attn_end[i]);
        float top = -INFINITY;
        for (size_t p = b; p < e; ++p) {
          const float* k = &ws_.naive_kv[p * kv_width + h * (nope + vd)];
          score[p] = (dot_f32(q, k, nope) + dot_f32(q + nope, &ws_.naive_lat[p * lat + kvl], hd - nope)) * scale;
          top = std::max(top, score[p]);
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (size_t p = b; p < e; ++p) {
          const float pr = std::exp(score[p] - top);
          sum += pr;
          const float* v = &ws_.naive_kv[p * kv_width + h * (nope + vd) + nope];
          for (size_t r = 0; r < vd; ++r) acc[r] += pr * v[r];
        }
        float* out = &ws_.att[i * static_cast<size_t>(heads) * vd + h * vd];
        for (size_t r = 0; r < vd; ++r) out[r] = static_cast<float>(acc[r] / sum);
      }
    });
  }
}

// x += proj, through the sub-block's post-norm where it has one (Gemma).
void DecoderModel::add_residual(const TensorView* post_norm, int32_t n, ThreadPool& pool) {
  const size_t dim = static_cast<size_t>(config_.dim);
  for_rows(pool, n, dim, [&](int32_t i) {
    float* p = &ws_.proj[i * dim];
    if (post_norm) rmsnorm(p, static_cast<const float*>(post_norm->data), p, config_.dim, config_.rms_eps);
    for (size_t j = 0; j < dim; ++j) ws_.x[i * dim + j] += p[j];
  });
}

void DecoderModel::ffn_block(int layer, int32_t n, ThreadPool& pool) {
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  norm_rows(w.ffn_norm, n, pool);
  if (w.router)
    moe_ffn(layer, n, pool);
  else
    dense_ffn(w, n, pool);
  add_residual(w.post_ffn_norm, n, pool);
}

// gate = act(gate) * up over n rows of `width`.
void DecoderModel::glu_rows(float* gate, const float* up, int32_t n, size_t width, ThreadPool& pool) {
  const auto glu = config_.ffn_act == FfnActivation::kGeluTanh ? geglu_tanh : swiglu;
  // An exp per element: weighed as twice a row's width.
  for_rows(pool, n, 2 * width, [&](int32_t i) {
    glu(&gate[i * width], &up[i * width], &gate[i * width], static_cast<int64_t>(width));
  });
}

void DecoderModel::dense_ffn(const LayerWeights& w, int32_t n, ThreadPool& pool) {
  mm_shared({w.w_gate, w.w_up}, ws_.xn.data(), n, {ws_.gate.data(), ws_.up.data()}, pool);
  glu_rows(ws_.gate.data(), ws_.up.data(), n, static_cast<size_t>(config_.ffn_dim), pool);
  mm(*w.w_down, ws_.gate.data(), n, ws_.proj.data(), pool);
  join_ranks(n);
}

// The observer sees an item's input rows, one at a time where they are
// picked from the batch.
void DecoderModel::observe_item(const MatmulItem& item) {
  if (!item.rows) return observer_->observe(*item.w, item.x, static_cast<int32_t>(item.m));
  for (int64_t t = 0; t < item.m; ++t)
    observer_->observe(*item.w, item.x + static_cast<int64_t>(item.rows[t]) * item.w->ne[0], 1);
}

// Every active expert runs once over the rows routed to it (all of a
// decode step's, or a prefill chunk's), so its weights stream once per
// step; all experts' products go in one grouped matmul (gate and up
// together, then down), and each row's outputs add up in expert order,
// whatever the batch.
void DecoderModel::moe_ffn(int layer, int32_t n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  const size_t dim = static_cast<size_t>(c.dim), ffn = static_cast<size_t>(c.expert_ffn_dim);
  mm(*w.router, ws_.xn.data(), n, ws_.router_logits.data(), pool);
  route_tokens(ws_.router_logits.data(), n, c.n_experts, c.n_experts_used, c.expert_weights_norm, ws_.routes);
  const ExpertRoutes& r = ws_.routes;
  const auto n_routed = static_cast<int32_t>(r.rows.size());
  // Per active expert, its rows' slices of the routed buffers: gate and up
  // (side by side, so the rows they share are quantized once) in one
  // grouped matmul, then down in another. in(e, item): expert e's input
  // rows set in the item.
  std::vector<MatmulItem>& items = ws_.moe_items;
  const auto add_items = [&](std::initializer_list<std::pair<const ExpertMatrices*, float*>> outs, auto in,
                             size_t y_width) {
    items.clear();
    for (int32_t e = 0; e < c.n_experts; ++e) {
      const auto ue = static_cast<size_t>(e), at = static_cast<size_t>(r.offset[ue]);
      if (r.count(e) == 0) continue;
      for (const auto& [mats, y] : outs) {
        MatmulItem item{mats->experts[ue], nullptr, r.count(e), y + at * y_width};
        in(e, item);
        if (observer_) observe_item(item);
        items.push_back(item);
      }
    }
  };
  // An expert's tokens are picked from the batch (matmul_grouped quantizes
  // the batch once and gathers each expert's rows); one that every row
  // routes to (all of a decode step's experts) reads the batch as it is.
  const auto routed_x = [&](int32_t e, MatmulItem& item) {
    item.x = ws_.xn.data();
    if (r.count(e) == n) return;
    item.rows = &r.rows[static_cast<size_t>(r.offset[static_cast<size_t>(e)])];
    item.x_rows = n;
  };
  add_items({{&w.exp_gate, ws_.gate.data()}, {&w.exp_up, ws_.up.data()}}, routed_x, ffn);
  matmul_grouped(items, ws_.scratch.data(), pool);
  glu_rows(ws_.gate.data(), ws_.up.data(), n_routed, ffn, pool);
  const auto gated_x = [&](int32_t e, MatmulItem& item) {
    item.x = &ws_.gate[static_cast<size_t>(r.offset[static_cast<size_t>(e)]) * ffn];
  };
  add_items({{&w.exp_down, ws_.moe_y.data()}}, gated_x, dim);
  matmul_grouped(items, ws_.scratch.data(), pool);
  for (int32_t e = 0; e < c.n_experts; ++e)
    if (r.count(e) > 0)
      expert_tokens_[static_cast<size_t>(layer) * static_cast<size_t>(c.n_experts) + static_cast<size_t>(e)].fetch_add(
          static_cast<uint64_t>(r.count(e)), std::memory_order_relaxed);
  const auto k = static_cast<size_t>(c.n_experts_used);
  for_rows(pool, n, dim * k, [&](int32_t i) {  // each row sums its experts' outputs in expert order
    float* out = &ws_.proj[i * dim];
    std::fill_n(out, dim, 0.0f);
    for (size_t j = 0; j < k; ++j) {
      const auto entry = static_cast<size_t>(r.entries[i * k + j]);
      const float* y = &ws_.moe_y[entry * dim];
      const float weight = r.weights[entry] * c.expert_weights_scale;
      for (size_t d = 0; d < dim; ++d) out[d] += weight * y[d];
    }
  });
  if (w.shared_gate) shared_expert(w, n, pool);
  join_ranks(n);
}

// The shared expert on every row, added after the routed ones, through
// sigmoid(x · g) where it is gated.
void DecoderModel::shared_expert(const LayerWeights& w, int32_t n, ThreadPool& pool) {
  const size_t dim = static_cast<size_t>(config_.dim);
  mm_shared({w.shared_gate, w.shared_up}, ws_.xn.data(), n, {ws_.gate.data(), ws_.up.data()}, pool);
  glu_rows(ws_.gate.data(), ws_.up.data(), n, static_cast<size_t>(config_.shared_expert_ffn_dim), pool);
  mm(*w.shared_down, ws_.gate.data(), n, ws_.moe_y.data(), pool);
  if (w.shared_router) mm(*w.shared_router, ws_.xn.data(), n, ws_.router_logits.data(), pool);
  for_rows(pool, n, dim, [&](int32_t i) {
    const float s = w.shared_router ? 1.0f / (1.0f + std::exp(-ws_.router_logits[static_cast<size_t>(i)])) : 1.0f;
    for (size_t j = 0; j < dim; ++j) ws_.proj[i * dim + j] += s * ws_.moe_y[i * dim + j];
  });
}

Result<int32_t> DecoderModel::run_layers(const Batch& batch, KvCache& cache, ThreadPool& pool, bool to_head) {
  DUET_TRY(check_batch(batch, cache));
  const int32_t n = batch.size();
  if (n == 0) return 0;
  if (comm_ && comm_->leads()) lead_forward(*comm_, batch, cache, to_head);
  for (const BlockCopy& c : batch.copies) cache.copy_block(c);
  ensure_workspace(n);
  embed(batch);
  plan_attention(batch);
  for (int l = 0; l < config_.n_layers; ++l) {
    attention_block(l, batch, cache, pool);
    ffn_block(l, n, pool);
  }
  // Only rows that want logits pay for the final norm and the vocabulary head.
  const size_t dim = static_cast<size_t>(config_.dim);
  int32_t m = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!batch.want_logits[static_cast<size_t>(i)]) continue;
    rmsnorm(&ws_.x[i * dim], static_cast<const float*>(output_norm_->data), &ws_.xn[m * dim],
            config_.dim, config_.rms_eps);
    ++m;
  }
  return m;
}

Status DecoderModel::forward(const Batch& batch, KvCache& cache, ThreadPool& pool, float* logits) {
  DUET_ASSIGN(const int32_t m, run_layers(batch, cache, pool, logits != nullptr));
  if (!logits || m == 0) return {};
  if (!comm_) {
    head(m, logits, pool);
    return {};
  }
  ws_.head_part.resize(static_cast<size_t>(m) * static_cast<size_t>(output_->rows()));
  head(m, ws_.head_part.data(), pool);
  gather_logits(m, logits);
  return {};
}

// The logits of output_'s rows (this rank's, under tensor parallelism) for
// the m rows of ws_.xn, [m][output_ rows], through Gemma's final soft-cap.
void DecoderModel::head(int32_t m, float* logits, ThreadPool& pool) {
  const int64_t rows = output_->rows();
  if (rows == 0) return;  // a vocabulary smaller than 16 rows per rank leaves some ranks none
  mm(*output_, ws_.xn.data(), m, logits, pool);
  if (const float cap = config_.final_softcap; cap > 0.0f)
    for_rows(pool, m, static_cast<size_t>(rows), [&](int32_t i) {
      float* row = logits + static_cast<size_t>(i) * static_cast<size_t>(rows);
      for (int64_t j = 0; j < rows; ++j) row[j] = cap * std::tanh(row[j] / cap);
    });
}

// Every rank's ws_.head_part into rank 0's logits [m][n_vocab]; the other
// ranks only send theirs.
void DecoderModel::gather_logits(int32_t m, float* logits) {
  std::vector<size_t> counts;
  for (const RowRange& r : head_rows_) counts.push_back(static_cast<size_t>(m) * static_cast<size_t>(r.count));
  if (!comm_->leads()) return comm_->gather(ws_.head_part.data(), nullptr, counts);
  // One row: the ranks' parts side by side are the row.
  if (m == 1) return comm_->gather(ws_.head_part.data(), logits, counts);
  const size_t vocab = static_cast<size_t>(config_.n_vocab);
  ws_.head_all.resize(static_cast<size_t>(m) * vocab);
  comm_->gather(ws_.head_part.data(), ws_.head_all.data(), counts);
  const float* from = ws_.head_all.data();
  for (const RowRange& r : head_rows_)
    for (size_t i = 0; i < static_cast<size_t>(m); ++i, from += r.count)
      std::copy_n(from, r.count, logits + i * vocab + static_cast<size_t>(r.first));
}

Status DecoderModel::hidden_states(const Batch& batch, KvCache& cache, ThreadPool& pool, float* hidden) {
  DUET_ASSIGN(const int32_t m, run_layers(batch, cache, pool, false));
  std::copy_n(ws_.xn.data(), static_cast<size_t>(m) * static_cast<size_t>(config_.dim), hidden);
  return {};
}

void DecoderModel::shift_keys(KvCache& cache, const BlockTable& table, int32_t begin, int32_t end,
                            int32_t delta, ThreadPool& pool) {
  if (comm_ && comm_->leads()) lead_shift_keys(*comm_, cache, table, begin, end, delta);
  const ModelConfig& c = config_;
  const auto rotate = c.rope_layout == RopeLayout::kNeox ? rope_neox : rope;
  const KvShape shape = kv_shape();
  const size_t hd = static_cast<size_t>(shape.head_dim);
  pool.parallel_for(static_cast<int64_t>(c.n_layers) * shape.n_kv_heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t job = lo; job < hi; ++job) {
      const auto layer = static_cast<int32_t>(job / shape.n_kv_heads);
      const auto h = static_cast<int32_t>(job % shape.n_kv_heads);
      // The keys of a block's slots are rotated together, as if they were
      // the heads of one row, sharing one set of cosines and sines. Loading
      // and storing goes through the cache's format (quantized keys are
      // requantized after the rotation).
      std::vector<float> rows(static_cast<size_t>(kBlockTokens) * hd);
      for (int32_t pos = begin; pos < end;) {
        const int32_t slot = pos % kBlockTokens;
        const int32_t n = std::min(kBlockTokens - slot, end - pos);
        const int32_t block = cache.blocks_of(table, layer)[static_cast<size_t>(pos / kBlockTokens)];
        for (int32_t i = 0; i < n; ++i) cache.load_key(layer, block, h, slot + i, &rows[i * hd]);
        if (c.mla())  // a latent row's k_pe, its last rope_dim dims
          for (int32_t i = 0; i < n; ++i)
            rotate(&rows[i * hd] + c.kv_lora_rank, 1, c.rope_dim, c.rope_dim, delta, inv_freq(layer));
        else
          rotate(rows.data(), n, c.head_dim, c.rope_dim, delta, inv_freq(layer));
        for (int32_t i = 0; i < n; ++i) cache.store_key(layer, block, h, slot + i, &rows[i * hd]);
        pos += n;
      }
    }
  });
}

}  // namespace

Result<std::unique_ptr<Model>> load_decoder(GgufFile file, ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                                            Communicator* comm) {
  auto model = std::make_unique<DecoderModel>(std::move(file), std::move(config), std::move(tokenizer), comm);
  DUET_TRY(model->bind());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace duet
