// AVX2 attention over a paged cache (attention_avx512.cc's design in 8-lane
// vectors), for machines without AVX-512: a tile of query rows (consecutive
// tokens of one sequence, each with the n_group heads of one KV head), head
// dims that are whole 16-element chunks (16, ..., 128; 160, 256, 576), f32
// caches read in place and f16, q8 and q4 ones widened once per block and
// tile into f32 staging. Per 16-key block of the cache:
//   - K is transposed once, as two 8 x 8 transposes per 8 elements (keys in
//     lanes, a key row per two vectors), so a query's 16 scores are two
//     chains of head_dim fmas with no horizontal sums, 6 queries at a time
//     (12 accumulators of the 16 registers);
//   - per query, an online softmax over the block (vector exp);
//   - the weighted values go into the outputs of 2 heads of a row at a time,
//     4 (or 2) output vectors each, each V vector loaded once for both.
// A decode part (attend_part_avx2) runs the same steps per head block, every
// KV head of a cache block in turn, for one query row.
// Every query's arithmetic is the same whatever else shares its tile, so a
// row gets the bits it gets alone (decode) inside any prefill chunk.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention.h"
#include "kernels/vec_math.h"

namespace duet {
namespace {

constexpr int kKeys = 16;
constexpr int kMaxQueries = kMaxAttnRows * kMaxAttnGroup;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// kt[d] = element d of keys 0..15 (lane j: key j), for one block's 16 keys
// (rows of D8 * 8 floats): per 8 keys and 8 elements, an 8 x 8 transpose.
template <int D8>
void transpose_keys(const float* k, float (*kt)[kKeys]) {
  constexpr int hd = D8 * 8;
  for (int half = 0; half < 2; ++half)
    for (int c = 0; c < D8; ++c) {
      __m256 r[8], t[8], u[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(k + (half * 8 + j) * hd + c * 8);
      // Per 128-bit lane: t[2i] = (r2i[0], r2i+1[0], r2i[1], r2i+1[1]), t[2i+1] the same for elements 2, 3.
      for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
      }
      // u[4i + e], per lane: element e (low lane) or 4 + e (high lane) of keys 4i..4i+3.
      for (int i = 0; i < 2; ++i) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
      }
      for (int e = 0; e < 4; ++e) {
        _mm256_store_ps(kt[c * 8 + e] + half * 8, _mm256_permute2f128_ps(u[e], u[4 + e], 0x20));
        _mm256_store_ps(kt[c * 8 + 4 + e] + half * 8, _mm256_permute2f128_ps(u[e], u[4 + e], 0x31));
      }
    }
}

// s[u] = scale * (q_u · keys), U queries at once (two fma chains each, in d order).
template <int D8, int U>
inline void scores(const float* const* qs, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  __m256 lo[U], hi[U];
  #pragma GCC unroll 8
  for (int u = 0; u < U; ++u) lo[u] = hi[u] = _mm256_setzero_ps();
  for (int d = 0; d < D8 * 8; ++d) {
    const __m256 k0 = _mm256_load_ps(kt[d]), k1 = _mm256_load_ps(kt[d] + 8);
    #pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      const __m256 qd = _mm256_broadcast_ss(qs[u] + d);
      lo[u] = _mm256_fmadd_ps(qd, k0, lo[u]);
      hi[u] = _mm256_fmadd_ps(qd, k1, hi[u]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  #pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    _mm256_store_ps(s[u], _mm256_mul_ps(lo[u], sc));
    _mm256_store_ps(s[u] + 8, _mm256_mul_ps(hi[u], sc));
  }
}

template <int D8>
void scores_any(const float* const* qs, int n, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  for (; n >= 6; n -= 6, qs += 6, s += 6) scores<D8, 6>(qs, kt, scale, s);
  switch (n) {
    case 5: return scores<D8, 5>(qs, kt, scale, s);
    case 4: return scores<D8, 4>(qs, kt, scale, s);
    case 3: return scores<D8, 3>(qs, kt, scale, s);
    case 2: return scores<D8, 2>(qs, kt, scale, s);
    case 1: return scores<D8, 1>(qs, kt, scale, s);
    default: return;
  }
}

inline float reduce_max(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

inline float reduce_add(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

// Lanes of keys [j0, j1) of a block: all ones there, zero elsewhere (low and high 8 keys).
struct KeyMask {
  __m256 lo, hi;
  KeyMask(int j0, int j1) {
    const __m256i a = _mm256_set1_epi32(j0 - 1), b = _mm256_set1_epi32(j1);
    const __m256i i0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), i1 = _mm256_add_epi32(i0, _mm256_set1_epi32(8));
    lo = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(i0, a), _mm256_cmpgt_epi32(b, i0)));
    hi = _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(i1, a), _mm256_cmpgt_epi32(b, i1)));
  }
};

// One query's softmax step over a block: turns its scores into weights (0
// outside `valid`), updates its running max and sum, and returns the factor
// its output so far must be scaled by (1 when the max did not move).
inline float softmax_step(float* s, const KeyMask& valid, float& m, float& l) {
  const __m256 ninf = _mm256_set1_ps(kNegInf);
  const __m256 v0 = _mm256_blendv_ps(ninf, _mm256_load_ps(s), valid.lo);
  const __m256 v1 = _mm256_blendv_ps(ninf, _mm256_load_ps(s + 8), valid.hi);
  const float block_max = reduce_max(_mm256_max_ps(v0, v1));
  const bool rescale = block_max > m;
  const float new_max = rescale ? block_max : m;
  const float correction = rescale ? std::exp(m - new_max) : 1.0f;
  const __m256 mx = _mm256_set1_ps(new_max);
  const __m256 w0 = _mm256_and_ps(valid.lo, vec_math::exp<vec::Vec256>(_mm256_sub_ps(v0, mx)));
  const __m256 w1 = _mm256_and_ps(valid.hi, vec_math::exp<vec::Vec256>(_mm256_sub_ps(v1, mx)));
  l = l * correction + reduce_add(_mm256_add_ps(w0, w1));
  m = new_max;
  _mm256_store_ps(s, w0);
  _mm256_store_ps(s + 8, w1);
  return correction;
}

// Output vectors [c0, c0 + C) of H heads of one row: outs[h] = outs[h] *
// corr[h] + sum_j p[h][j] v[j] over keys [j0, j1), one fma chain per output
// vector, in j order.
template <int D8, int H, int C>
inline void add_values(float* const* outs, const float* const* p, const float* corr, const float* v, int j0, int j1,
                       int c0) {
  __m256 o[H][C];
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      o[h][c] = _mm256_loadu_ps(outs[h] + (c0 + c) * 8);
      if (corr[h] != 1.0f) o[h][c] = _mm256_mul_ps(o[h][c], _mm256_set1_ps(corr[h]));
    }
  for (int j = j0; j < j1; ++j) {
    __m256 pj[H];
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) pj[h] = _mm256_broadcast_ss(p[h] + j);
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m256 vc = _mm256_loadu_ps(v + j * D8 * 8 + (c0 + c) * 8);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) o[h][c] = _mm256_fmadd_ps(pj[h], vc, o[h][c]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 4
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(outs[h] + (c0 + c) * 8, o[h][c]);
}

template <int D8, int H>
inline void add_values_all(float* const* outs, const float* const* p, const float* corr, const float* v, int j0,
                           int j1) {
  constexpr int C = D8 % 4 == 0 ? 4 : 2;
  for (int c0 = 0; c0 < D8; c0 += C) add_values<D8, H, C>(outs, p, corr, v, j0, j1, c0);
}

// 8 int8 values times d, as floats.
inline __m256 widen8(__m128i b, __m256 d) { return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b))); }

// One quantized row widened to f32 (core/kv_format.h): q8 is int8 times the
// row's scale; q4 is 4-bit codes less 8 (element 2j in byte j's low nibble,
// 2j + 1 in its high one) times each 32-element group's scale. Products of
// exact values, so equal to kv_dequantize_row's.
template <int D8>
inline void widen_q8(const uint8_t* row, uint16_t scale, float* out) {
  const __m256 d = _mm256_set1_ps(_cvtsh_ss(scale));
  for (int c = 0; c < D8; ++c)
    _mm256_store_ps(out + c * 8, widen8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c * 8)), d));
}

template <int D8>
inline void widen_q4(const uint8_t* row, const uint16_t* scales, float* out) {
  static_assert(D8 % 4 == 0, "q4 rows are whole 32-element groups here");
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int g = 0; g < D8 / 4; ++g) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16));
    const __m128i lo = _mm_and_si128(b, low4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const __m128i first = _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight);  // elements 0..15 of the group
    const __m128i second = _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(scales[g]));
    float* o = out + g * 32;
    _mm256_store_ps(o, widen8(first, d));
    _mm256_store_ps(o + 8, widen8(_mm_unpackhi_epi64(first, first), d));
    _mm256_store_ps(o + 16, widen8(second, d));
    _mm256_store_ps(o + 24, widen8(_mm_unpackhi_epi64(second, second), d));
  }
}

// The rows [first, last) of one head block's K or V as f32 rows of D8 * 8,
// the others zero (the transposes read all 16; no row outside is ever
// weighted). A quantized block keeps its fp16 scales scales_offset bytes in.
template <int D8>
const float* widen_rows(const uint8_t* block, KvType type, size_t scales_offset, int first, int last,
                        float* staged) {
  constexpr int hd = D8 * 8;
  const bool whole = first == 0 && last == kKeys;
  if (type == KvType::F32 && whole) return reinterpret_cast<const float*>(block);
  if (!whole) std::fill(staged, staged + kKeys * hd, 0.0f);
  const auto* scales = reinterpret_cast<const uint16_t*>(block + scales_offset);
  switch (type) {
    case KvType::F32:
      std::memcpy(staged + first * hd, block + static_cast<size_t>(first) * hd * sizeof(float),
                  static_cast<size_t>(last - first) * hd * sizeof(float));
      break;
    case KvType::F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(block);
      for (int j = first; j < last; ++j)
        for (int c = 0; c < D8; ++c)
          _mm256_store_ps(staged + j * hd + c * 8,
                          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + j * hd + c * 8))));
      break;
    }
    case KvType::Q8:
      for (int j = first; j < last; ++j) widen_q8<D8>(block + j * hd, scales[j], staged + j * hd);
      break;
    case KvType::Q4:
      if constexpr (D8 % 4 == 0)
        for (int j = first; j < last; ++j) widen_q4<D8>(block + j * hd / 2, scales + j * (D8 / 4), staged + j * hd);
      break;
  }
  return staged;
}

// Asks for a head block of the next cache block while this one is computed
// (one head's blocks are a block stride apart, a jump the hardware
// prefetcher does not follow).
inline void prefetch_block(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

template <int D8>
void attend_rows(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, const PagedKv& kv,
                 const int32_t* begins, const int32_t* ends, float scale, float* out, size_t out_stride) {
  constexpr int hd = D8 * 8;
  constexpr int kHeads = 2;  // heads whose outputs are computed together
  const int nq = n_rows * n_group;
  alignas(32) float kt[hd][kKeys];
  alignas(32) float s[kMaxQueries][kKeys];
  float m[kMaxQueries], l[kMaxQueries], corr[kMaxQueries];
  const float* qs[kMaxQueries];
  float* outs[kMaxQueries];
  for (int r = 0; r < n_rows; ++r)
    for (int g = 0; g < n_group; ++g) {
      qs[r * n_group + g] = q + r * q_stride + g * hd;
      outs[r * n_group + g] = out + r * out_stride + g * hd;
      std::fill(outs[r * n_group + g], outs[r * n_group + g] + hd, 0.0f);
    }
  std::fill(m, m + nq, kNegInf);
  std::fill(l, l + nq, 0.0f);
  const int32_t lo = *std::min_element(begins, begins + n_rows);
  const int32_t hi = *std::max_element(ends, ends + n_rows);
  const size_t head_block_bytes = kKeys * kv_row_total_bytes(kv.type, hd);
  alignas(32) float staged_k[kKeys * hd];
  alignas(32) float staged_v[kKeys * hd];
  for (int32_t blk0 = lo / kKeys * kKeys; blk0 < hi; blk0 += kKeys) {
    const size_t block = static_cast<size_t>(kv.block_ids[blk0 / kKeys]);
    // Keys some row of the tile reads; the others are never loaded (they may
    // be another sequence's leftovers, or never written).
    const int first = std::max(lo, blk0) - blk0, last = std::min(hi, blk0 + kKeys) - blk0;
    if (blk0 + kKeys < hi) {
      const size_t next = static_cast<size_t>(kv.block_ids[blk0 / kKeys + 1]) * kv.block_stride;
      prefetch_block(kv.k_base + next, head_block_bytes);
      if (kv.v_base != kv.k_base) prefetch_block(kv.v_base + next, head_block_bytes);
    }
    const float* k =
        widen_rows<D8>(kv.k_base + block * kv.block_stride, kv.type, kv.scales_offset, first, last, staged_k);
    const float* v = widen_rows<D8>(kv.v_base + block * kv.block_stride, kv.type, kv.scales_offset, first, last,
                                    staged_v);
    transpose_keys<D8>(k, kt);
    scores_any<D8>(qs, nq, kt, scale, s);
    for (int r = 0; r < n_rows; ++r) {
      const int j0 = std::max(begins[r], blk0) - blk0, j1 = std::min(ends[r], blk0 + kKeys) - blk0;
      if (j0 >= j1) continue;  // nothing of this row in the block
      const KeyMask valid(j0, j1);
      const int base = r * n_group;
      for (int g = 0; g < n_group; ++g) corr[base + g] = softmax_step(s[base + g], valid, m[base + g], l[base + g]);
      const float* p[kMaxAttnGroup];
      for (int g = 0; g < n_group; ++g) p[g] = s[base + g];
      int g = 0;
      for (; g + kHeads <= n_group; g += kHeads)
        add_values_all<D8, kHeads>(outs + base + g, p + g, corr + base + g, v, j0, j1);
      for (; g < n_group; ++g) add_values_all<D8, 1>(outs + base + g, p + g, corr + base + g, v, j0, j1);
    }
  }
  for (int i = 0; i < nq; ++i) {
    const __m256 inv = _mm256_set1_ps(l[i] > 0.0f ? 1.0f / l[i] : 0.0f);
    for (int c = 0; c < D8; ++c) _mm256_storeu_ps(outs[i] + c * 8, _mm256_mul_ps(_mm256_loadu_ps(outs[i] + c * 8), inv));
  }
}

// The cache's head block of KV head h in the block holding key `key`.
inline const uint8_t* head_block(const uint8_t* base, const PagedKv& kv, size_t head_stride, int32_t key, int32_t h) {
  return base + static_cast<size_t>(kv.block_ids[key / kKeys]) * kv.block_stride + h * head_stride;
}

// One decode part (attention.h, attend_part_avx512): per block, every KV
// head in turn, each head block widened and transposed once for its group.
template <int D8>
void attend_part(const float* q, int32_t n_heads, int32_t n_group, const PagedKv& kv, size_t head_stride,
                 int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  constexpr int hd = D8 * 8;
  constexpr int kHeads = 2;
  alignas(32) float kt[hd][kKeys];
  alignas(32) float s[kMaxAttnGroup][kKeys];
  alignas(32) float staged_k[kKeys * hd];
  alignas(32) float staged_v[kKeys * hd];
  float corr[kMaxAttnGroup];
  const float* qs[kMaxAttnGroup];
  const float* p[kMaxAttnGroup];
  float* outs[kMaxAttnGroup];
  const size_t head_block_bytes = kKeys * kv_row_total_bytes(kv.type, hd);
  // Head blocks (K and V) prefetched about 16 KiB ahead of the one computed:
  // for a q8 or q4 head block (1-2 KiB) one ahead arrives too late.
  constexpr size_t kPrefetchBytes = 16 << 10;
  const auto ahead = static_cast<int32_t>(std::max<size_t>(1, kPrefetchBytes / (2 * head_block_bytes)));
  int32_t next_h = ahead % n_heads, next_key = begin / kKeys * kKeys + ahead / n_heads * kKeys;
  for (int32_t blk0 = begin / kKeys * kKeys; blk0 < end; blk0 += kKeys) {
    const int first = std::max(begin, blk0) - blk0, last = std::min(end, blk0 + kKeys) - blk0;
    const KeyMask valid(first, last);
    for (int32_t h = 0; h < n_heads; ++h) {
      if (next_key < end) {
        prefetch_block(head_block(kv.k_base, kv, head_stride, next_key, next_h), head_block_bytes);
        if (kv.v_base != kv.k_base)
          prefetch_block(head_block(kv.v_base, kv, head_stride, next_key, next_h), head_block_bytes);
      }
      if (++next_h == n_heads) {  // no division per head block
        next_h = 0;
        next_key += kKeys;
      }
      const int32_t q0 = h * n_group;
      for (int g = 0; g < n_group; ++g) {
        qs[g] = q + static_cast<size_t>(q0 + g) * hd;
        outs[g] = out + static_cast<size_t>(q0 + g) * hd;
        p[g] = s[g];
      }
      const float* k = widen_rows<D8>(head_block(kv.k_base, kv, head_stride, blk0, h), kv.type, kv.scales_offset,
                                      first, last, staged_k);
      const float* v = widen_rows<D8>(head_block(kv.v_base, kv, head_stride, blk0, h), kv.type, kv.scales_offset,
                                      first, last, staged_v);
      transpose_keys<D8>(k, kt);
      scores_any<D8>(qs, n_group, kt, scale, s);
      for (int g = 0; g < n_group; ++g) corr[g] = softmax_step(s[g], valid, m[q0 + g], l[q0 + g]);
      int g = 0;
      for (; g + kHeads <= n_group; g += kHeads) add_values_all<D8, kHeads>(outs + g, p + g, corr + g, v, first, last);
      for (; g < n_group; ++g) add_values_all<D8, 1>(outs + g, p + g, corr + g, v, first, last);
    }
  }
}

}  // namespace

bool attend_part_avx2(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                      size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  if (kv.block_tokens != kKeys || n_group > kMaxAttnGroup) return false;
  if (kv.type == KvType::Q4 && head_dim % 32 != 0) return false;
  switch (head_dim) {
    case 16: attend_part<2>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 32: attend_part<4>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 48: attend_part<6>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 64: attend_part<8>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 80: attend_part<10>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 96: attend_part<12>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 128: attend_part<16>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 160: attend_part<20>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    case 256: attend_part<32>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out); return true;
    default: return false;  // 576 (latent attention) has its own call, as on AVX-512
  }
}

bool attend_rows_avx2(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                      const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                      size_t out_stride) {
  if (kv.block_tokens != kKeys || n_rows > kMaxAttnRows || n_group > kMaxAttnGroup) return false;
  // q4 widens whole 32-element groups (head dims 32, 64, ..., 576).
  if (kv.type == KvType::Q4 && head_dim % 32 != 0) return false;
  switch (head_dim) {
    case 16: attend_rows<2>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 32: attend_rows<4>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 48: attend_rows<6>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 64: attend_rows<8>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 80: attend_rows<10>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 96: attend_rows<12>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 128: attend_rows<16>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 160: attend_rows<20>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 256: attend_rows<32>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 576: attend_rows<72>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    default: return false;
  }
}

}  // namespace duet
