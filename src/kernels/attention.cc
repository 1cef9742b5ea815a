#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kv_rows.h"
#include "kernels/registry.h"

namespace duet {
namespace {

constexpr int32_t kMaxBlock = 64;

// The row kernels of any type and level, through the dispatch table.
struct TableRows {
  const KvRowKernels& k;
  void scores(const float* q, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* s) const {
    k.scores(q, rows, sc, n, hd, s);
  }
  void accumulate(const float* p, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* out) const {
    k.accumulate(p, rows, sc, n, hd, out);
  }
};

// The f32 loops inlined, so the default (unquantized) path pays no indirect
// call per block; the same loops as the table's scalar f32 entry.
struct F32Rows {
  void scores(const float* q, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* s) const {
    kv_rows::scores<kv_rows::F32Row, KvType::F32>(q, rows, sc, n, hd, s);
  }
  void accumulate(const float* p, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* out) const {
    kv_rows::accumulate<kv_rows::F32Row, KvType::F32>(p, rows, sc, n, hd, out);
  }
};

template <class Rows>
void attend(const Rows& rk, const float* q, int32_t n_group, int32_t head_dim,
            const PagedKv& kv, int32_t begin, int32_t end, AttnScale scale, float* out) {
  const size_t row_bytes = kv_row_bytes(kv.type, head_dim);
  const size_t n_scales = static_cast<size_t>(kv_row_scales(kv.type, head_dim));
  // Running max and denominator per query head; out holds the unnormalized sum.
  float m[kMaxAttnGroup], l[kMaxAttnGroup], s[kMaxBlock];
  std::fill(m, m + n_group, -std::numeric_limits<float>::infinity());
  std::fill(l, l + n_group, 0.0f);
  std::fill(out, out + static_cast<size_t>(n_group) * head_dim, 0.0f);

  for (int32_t start = begin; start < end;) {
    const int32_t in_block = start % kv.block_tokens;
    const int32_t len = std::min(kv.block_tokens - in_block, end - start);
    const size_t block = static_cast<size_t>(kv.block_ids[start / kv.block_tokens]);
    const uint8_t* kb = kv.k_base + block * kv.block_stride;
    const uint8_t* vb = kv.v_base + block * kv.block_stride;
    const uint8_t* k = kb + in_block * row_bytes;
    const uint8_t* v = vb + in_block * row_bytes;
    const auto* ks = reinterpret_cast<const uint16_t*>(kb + kv.scales_offset) + in_block * n_scales;
    const auto* vs = reinterpret_cast<const uint16_t*>(vb + kv.scales_offset) + in_block * n_scales;
    start += len;
    for (int32_t g = 0; g < n_group; ++g) {
      const float* qg = q + static_cast<size_t>(g) * head_dim;
      float* og = out + static_cast<size_t>(g) * head_dim;
      rk.scores(qg, k, ks, len, head_dim, s);
      float block_max = -std::numeric_limits<float>::infinity();
      for (int32_t t = 0; t < len; ++t) {
        s[t] *= scale.scale;
        if (scale.softcap > 0.0f) s[t] = scale.softcap * std::tanh(s[t] / scale.softcap);
        block_max = std::max(block_max, s[t]);
      }
      const float new_max = std::max(m[g], block_max);
      const float correction = std::exp(m[g] - new_max);
      l[g] *= correction;
      for (int32_t d = 0; d < head_dim; ++d) og[d] *= correction;
      for (int32_t t = 0; t < len; ++t) {
        s[t] = std::exp(s[t] - new_max);  // now the weight p of token t
        l[g] += s[t];
      }
      rk.accumulate(s, v, vs, len, head_dim, og);
      m[g] = new_max;
    }
  }
  for (int32_t g = 0; g < n_group; ++g) {
    const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    float* og = out + static_cast<size_t>(g) * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) og[d] *= inv;
  }
}

// The vector kernel, where the level has one and it takes this cache type,
// head dim and group (it says no by returning false).
bool vector_rows(const KernelSet& ks, const float* q, size_t q_stride, int32_t n_rows, int32_t n_group,
                 int32_t head_dim, const PagedKv& kv, const int32_t* begins, const int32_t* ends, AttnScale scale,
                 float* out, size_t out_stride) {
  const AttendRowsFn rows = ks.attend_rows();
  return rows && scale.softcap == 0.0f &&
         rows(q, q_stride, n_rows, n_group, head_dim, kv, begins, ends, scale.scale, out, out_stride);
}

bool attend_vector(const KernelSet& ks, const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                   int32_t begin, int32_t end, AttnScale scale, float* out) {
  return vector_rows(ks, q, 0, 1, n_group, head_dim, kv, &begin, &end, scale, out, 0);
}

}  // namespace

void attend_paged(const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                  int32_t begin, int32_t end, AttnScale scale, float* out) {
  const KernelSet& ks = kernels();
  if (attend_vector(ks, q, n_group, head_dim, kv, begin, end, scale, out)) return;
  if (kv.type == KvType::F32) return attend(F32Rows{}, q, n_group, head_dim, kv, begin, end, scale, out);
  attend(TableRows{*ks.kv_rows(kv.type)}, q, n_group, head_dim, kv, begin, end, scale, out);
}

void attend_paged_at(CpuLevel level, const float* q, int32_t n_group, int32_t head_dim,
                     const PagedKv& kv, int32_t begin, int32_t end, AttnScale scale, float* out) {
  const KernelSet& ks = kernels_at(level);
  if (attend_vector(ks, q, n_group, head_dim, kv, begin, end, scale, out)) return;
  attend(TableRows{*ks.kv_rows(kv.type)}, q, n_group, head_dim, kv, begin, end, scale, out);
}

void attend_paged_rows(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                       const PagedKv& kv, const int32_t* begins, const int32_t* ends, AttnScale scale, float* out,
                       size_t out_stride) {
  const KernelSet& ks = kernels();
  for (int32_t r0 = 0; r0 < n_rows; r0 += kMaxAttnRows) {
    const int32_t n = std::min(kMaxAttnRows, n_rows - r0);
    const float* qr = q + static_cast<size_t>(r0) * q_stride;
    float* outr = out + static_cast<size_t>(r0) * out_stride;
    if (vector_rows(ks, qr, q_stride, n, n_group, head_dim, kv, begins + r0, ends + r0, scale, outr, out_stride))
      continue;
    for (int32_t r = 0; r < n; ++r)
      attend_paged(qr + static_cast<size_t>(r) * q_stride, n_group, head_dim, kv, begins[r0 + r], ends[r0 + r],
                   scale, outr + static_cast<size_t>(r) * out_stride);
  }
}

}  // namespace duet
