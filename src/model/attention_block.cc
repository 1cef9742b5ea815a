// Attention over the paged cache: q, k and v (biases, q/k norms, RoPE),
// each row's K/V stored, then each row attends its sequence's keys.
#include "model/decoder_model.h"

namespace duet {
namespace {

void add_bias(float* y, const TensorView* bias, int32_t n, int32_t width) {
  if (!bias) return;
  const float* b = static_cast<const float*>(bias->data);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < width; ++j) y[static_cast<size_t>(i) * width + j] += b[j];
}

// LongRoPE's attention factor multiplies the rotated dims of each head (its
// cosines and sines), not the dims RoPE passes through.
void scale_rotated(float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, float factor) {
  for (int32_t h = 0; h < n_heads; ++h)
    for (int32_t d = 0; d < rope_dim; ++d) x[h * head_dim + d] *= factor;
}

}  // namespace

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

}  // namespace duet
