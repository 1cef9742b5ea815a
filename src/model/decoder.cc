// The forward pass over a batch and the paged KV cache: embed, then each
// layer's attention block and FFN block (attention_block.cc, mla_block.cc,
// ffn_block.cc) top to bottom, then the output norm and the vocabulary head.
#include "model/decoder_model.h"

namespace duet {

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

// x += proj, through the sub-block's post-norm where it has one (Gemma).
void DecoderModel::add_residual(const TensorView* post_norm, int32_t n, ThreadPool& pool) {
  const size_t dim = static_cast<size_t>(config_.dim);
  for_rows(pool, n, dim, [&](int32_t i) {
    float* p = &ws_.proj[i * dim];
    if (post_norm) rmsnorm(p, static_cast<const float*>(post_norm->data), p, config_.dim, config_.rms_eps);
    for (size_t j = 0; j < dim; ++j) ws_.x[i * dim + j] += p[j];
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

}  // namespace duet
