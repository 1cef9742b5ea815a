// Loading the decoder: binding each layer's tensors, this rank's shard of
// them under tensor parallelism, packing for the int8 kernels, the RoPE
// tables; and what a pass costs (bytes, FLOPs).
#include "model/decoder_model.h"

namespace duet {
namespace {

namespace n = gguf_names;

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

}  // namespace

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

Result<std::unique_ptr<Model>> load_decoder(GgufFile file, ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                                            Communicator* comm) {
  auto model = std::make_unique<DecoderModel>(std::move(file), std::move(config), std::move(tokenizer), comm);
  DUET_TRY(model->bind());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace duet
