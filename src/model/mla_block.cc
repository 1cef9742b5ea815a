// Multi-head latent attention (DeepSeek-V2) over the cached latents.
#include "model/decoder_model.h"

namespace duet {
namespace {

float dot_f32(const float* a, const float* b, size_t n) {
  float s = 0.0f;
  for (size_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

}  // namespace

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

}  // namespace duet
