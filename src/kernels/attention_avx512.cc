// AVX-512 attention over a paged cache of any type (f16, q8 and q4 rows are
// widened once per block and tile, into the same f32 staging), for head dims that are whole
// vectors (16, 32, ..., 128; 160, 256, and 576 for latent attention), for a tile of query rows (consecutive tokens of
// one sequence, each with the n_group heads of one KV head). Per 16-key
// block of the cache:
//   - K is transposed once (keys in lanes), so a query's 16 scores are one
//     chain of head_dim fmas with no horizontal sums, 8 queries at a time;
//   - per query, an online softmax over the block (vector exp; no rescaling
//     when the block does not raise the running max);
//   - the weighted values go into the outputs of up to 4 heads of a row at a
//     time (they share the row's keys), each V vector loaded once for them.
// Every query's arithmetic is the same whatever else shares its tile, so a
// row gets the bits it gets alone (decode) inside any prefill chunk.
// Keys in lanes matter because a horizontal reduction per 16 keys and per
// query would cost more than the fmas it sums.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/vec_math.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace duet {
namespace {

constexpr int kKeys = 16;
constexpr int kMaxQueries = kMaxAttnRows * kMaxAttnGroup;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr size_t kPrefetchBytes = 16 << 10;

// kt[d] = element d of keys 0..15 (lane j: key j), for one block's 16 keys
// (rows of D * 16 floats): per 16-element chunk, a 16 x 16 transpose.
template <int D>
void transpose_keys(const float* k, float (*kt)[kKeys]) {
  for (int c = 0; c < D; ++c) {
    __m512 r[16], t[16];
    for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(k + j * D * 16 + c * 16);
    // Per 128-bit lane L: t[2i] = (r2i[4L], r2i+1[4L], r2i[4L+1], r2i+1[4L+1]), t[2i+1] the same for 4L+2, 4L+3.
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + q], lane L: element 4L + q of keys 4i..4i+3.
    __m512 u[16];
    for (int i = 0; i < 4; ++i) {
      const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
      const __m512d e = _mm512_castps_pd(t[4 * i + 2]), f = _mm512_castps_pd(t[4 * i + 3]);
      u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, e));
      u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, e));
      u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, f));
      u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, f));
    }
    // For each q, a 4 x 4 transpose of 128-bit lanes over the key quads.
    for (int q = 0; q < 4; ++q) {
      const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512 v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], _MM_SHUFFLE(3, 1, 3, 1));
      const __m512 v2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512 v3 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], _MM_SHUFFLE(3, 1, 3, 1));
      _mm512_store_ps(kt[c * 16 + 0 + q], _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_store_ps(kt[c * 16 + 8 + q], _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1)));
      _mm512_store_ps(kt[c * 16 + 4 + q], _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_store_ps(kt[c * 16 + 12 + q], _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }
}

// s[u] = scale * (q_u · keys), U queries at once (one fma chain each, in d order).
template <int D, int U>
inline void scores(const float* const* qs, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  __m512 acc[U];
  #pragma GCC unroll 8
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  for (int d = 0; d < D * 16; ++d) {
    const __m512 kd = _mm512_load_ps(kt[d]);
    #pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[u] = _mm512_fmadd_ps(_mm512_set1_ps(qs[u][d]), kd, acc[u]);
  }
  #pragma GCC unroll 8
  for (int u = 0; u < U; ++u) _mm512_store_ps(s[u], _mm512_mul_ps(acc[u], _mm512_set1_ps(scale)));
}

template <int D>
void scores_any(const float* const* qs, int n, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  for (; n >= 8; n -= 8, qs += 8, s += 8) scores<D, 8>(qs, kt, scale, s);
  switch (n) {
    case 7: return scores<D, 7>(qs, kt, scale, s);
    case 6: return scores<D, 6>(qs, kt, scale, s);
    case 5: return scores<D, 5>(qs, kt, scale, s);
    case 4: return scores<D, 4>(qs, kt, scale, s);
    case 3: return scores<D, 3>(qs, kt, scale, s);
    case 2: return scores<D, 2>(qs, kt, scale, s);
    case 1: return scores<D, 1>(qs, kt, scale, s);
    default: return;
  }
}

// One query's softmax step over a block: turns its scores into weights (0
// outside `valid`), updates its running max and sum, and returns the factor
// its output so far must be scaled by (1 when the max did not move).
inline float softmax_step(float* s, __mmask16 valid, float& m, float& l) {
  const __m512 v = _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), valid, _mm512_load_ps(s));
  const float block_max = _mm512_reduce_max_ps(v);
  const bool rescale = block_max > m;
  const float new_max = rescale ? block_max : m;
  const float correction = rescale ? std::exp(m - new_max) : 1.0f;
  const __m512 w = _mm512_maskz_mov_ps(valid, vec_math::exp<vec::Vec512>(_mm512_sub_ps(v, _mm512_set1_ps(new_max))));
  l = l * correction + _mm512_reduce_add_ps(w);
  m = new_max;
  _mm512_store_ps(s, w);
  return correction;
}

// outs[h] = outs[h] * corr[h] + sum_j p[h][j] v[j] over keys [j0, j1), H
// heads of one row at once: one fma chain per output vector, in j order.
template <int D, int H>
inline void add_values(float* const* outs, const float* const* p, const float* corr, const float* v, int j0,
                       int j1) {
  __m512 o[H][D];
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < D; ++c) {
      o[h][c] = _mm512_loadu_ps(outs[h] + c * 16);
      if (corr[h] != 1.0f) o[h][c] = _mm512_mul_ps(o[h][c], _mm512_set1_ps(corr[h]));
    }
  for (int j = j0; j < j1; ++j) {
    __m512 pj[H];
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) pj[h] = _mm512_set1_ps(p[h][j]);
    #pragma GCC unroll 8
    for (int c = 0; c < D; ++c) {
      const __m512 vc = _mm512_loadu_ps(v + j * D * 16 + c * 16);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) o[h][c] = _mm512_fmadd_ps(pj[h], vc, o[h][c]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 8
    for (int c = 0; c < D; ++c) _mm512_storeu_ps(outs[h] + c * 16, o[h][c]);
}

// One quantized row widened to f32 (core/kv_format.h): q8 is int8 times
// the row's scale; q4 is 4-bit codes less 8 (element 2j in byte j's low
// nibble, 2j + 1 in its high one) times each 32-element group's scale.
// Products of exact values, so equal to kv_dequantize_row's.
template <int D>
inline void widen_q8(const uint8_t* row, uint16_t scale, float* out) {
  const __m512 d = _mm512_set1_ps(_cvtsh_ss(scale));
  for (int c = 0; c < D; ++c) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c * 16));
    _mm512_store_ps(out + c * 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b))));
  }
}

template <int D>
inline void widen_q4(const uint8_t* row, const uint16_t* scales, float* out) {
  static_assert(D % 2 == 0, "q4 rows are whole 32-element groups here");
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int g = 0; g < D / 2; ++g) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16));
    const __m128i lo = _mm_and_si128(b, low4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const __m128i first = _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight);  // elements 0..15 of the group
    const __m128i second = _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(scales[g]));
    _mm512_store_ps(out + g * 32, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(first))));
    _mm512_store_ps(out + g * 32 + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(second))));
  }
}

// The rows [first, last) of one head block's K or V as f32 rows of D * 16,
// the others zero (the transposes read all 16; no row outside is ever
// weighted). A quantized block keeps its fp16 scales scales_offset bytes in.
template <int D>
const float* widen_rows(const uint8_t* block, KvType type, size_t scales_offset, int first, int last,
                        float* staged) {
  constexpr int hd = D * 16;
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
        for (int c = 0; c < D; ++c)
          _mm512_store_ps(staged + j * hd + c * 16,
                          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + j * hd + c * 16))));
      break;
    }
    case KvType::Q8:
      for (int j = first; j < last; ++j) widen_q8<D>(block + j * hd, scales[j], staged + j * hd);
      break;
    case KvType::Q4:
      if constexpr (D % 2 == 0)
        for (int j = first; j < last; ++j) widen_q4<D>(block + j * hd / 2, scales + j * (D / 2), staged + j * hd);
      break;
  }
  return staged;
}

// Asks for a head block of the next cache block while this one is computed:
// the blocks of one head are a block stride apart (every other head's and
// layer's rows lie between), a jump the hardware prefetcher does not follow.
inline void prefetch_block(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

template <int D>
void attend_rows(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, const PagedKv& kv,
                 const int32_t* begins, const int32_t* ends, float scale, float* out, size_t out_stride) {
  constexpr int hd = D * 16;
  constexpr int kHeads = D <= 4 ? 4 : D <= 8 ? 2 : 1;  // heads whose outputs stay in registers together
  const int nq = n_rows * n_group;
  alignas(64) float kt[hd][kKeys];
  alignas(64) float s[kMaxQueries][kKeys];
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
  // One head block: its 16 rows and their scales.
  const size_t head_block_bytes =
      kKeys * kv_row_total_bytes(kv.type, hd);
  alignas(64) float staged_k[kKeys * hd];
  alignas(64) float staged_v[kKeys * hd];
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
        widen_rows<D>(kv.k_base + block * kv.block_stride, kv.type, kv.scales_offset, first, last, staged_k);
    // V rows outside [first, last) are never read: no zeroing needed.
    const float* v = kv.type == KvType::F32
                         ? reinterpret_cast<const float*>(kv.v_base + block * kv.block_stride)
                         : widen_rows<D>(kv.v_base + block * kv.block_stride, kv.type, kv.scales_offset, first,
                                         last, staged_v);
    transpose_keys<D>(k, kt);
    scores_any<D>(qs, nq, kt, scale, s);
    for (int r = 0; r < n_rows; ++r) {
      const int j0 = std::max(begins[r], blk0) - blk0, j1 = std::min(ends[r], blk0 + kKeys) - blk0;
      if (j0 >= j1) continue;  // nothing of this row in the block
      const auto valid = static_cast<__mmask16>(((1u << j1) - 1) & ~((1u << j0) - 1));
      const int base = r * n_group;
      for (int g = 0; g < n_group; ++g) corr[base + g] = softmax_step(s[base + g], valid, m[base + g], l[base + g]);
      const float* p[kMaxAttnGroup];
      for (int g = 0; g < n_group; ++g) p[g] = s[base + g];
      int g = 0;
      for (; g + kHeads <= n_group; g += kHeads)
        add_values<D, kHeads>(outs + base + g, p + g, corr + base + g, v, j0, j1);
      for (; g < n_group; ++g) add_values<D, 1>(outs + base + g, p + g, corr + base + g, v, j0, j1);
    }
  }
  for (int i = 0; i < nq; ++i) {
    const __m512 inv = _mm512_set1_ps(l[i] > 0.0f ? 1.0f / l[i] : 0.0f);
    for (int c = 0; c < D; ++c) _mm512_storeu_ps(outs[i] + c * 16, _mm512_mul_ps(_mm512_loadu_ps(outs[i] + c * 16), inv));
  }
}

// Elements 16c..16c+15 of row j of a f32, f16 or q8 head block, as floats,
// widened in registers (q8 without its row's scale: the caller scales the
// dot, or the weight, once per row).
template <KvType T, int D>
inline __m512 row_chunk(const uint8_t* block, int j, int c) {
  constexpr int hd = D * 16;
  if constexpr (T == KvType::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(block) + j * hd + c * 16);
  } else if constexpr (T == KvType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + (j * hd + c * 16) * 2)));
  } else {
    static_assert(T == KvType::Q8, "q4 goes by q4_group");
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + j * hd + c * 16));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
  }
}

// One q4 group (32 elements, 16 bytes) by table: each byte, zero-extended to
// a lane, indexes a table of (code - 8) * the group's scale with its low
// nibble (vpermps reads an index's low 4 bits: element 2i) and, shifted, its
// high one (element 2i + 1). The elements come out split, even and odd, so
// a part keeps its queries and outputs in that order (attend_part): 4 ops
// per 16 elements where unpacking them in order costs 10. The values are
// widen_q4's (the same exact product).
inline void q4_group(const uint8_t* bytes, const float* scale, __m512& even, __m512& odd) {
  const __m512 codes = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  const __m512 table = _mm512_mul_ps(_mm512_set1_ps(*scale), codes);
  even = _mm512_permutexvar_ps(x, table);
  odd = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), table);
}

// The fp16 group scales of a q4 head block's 16 rows as floats, all at once
// (a broadcast from memory per group then costs no shuffle).
template <int D>
inline void q4_scales(const uint16_t* scales, float* out) {
  #pragma GCC unroll 8
  for (int i = 0; i < D / 2; ++i)
    _mm512_store_ps(out + i * 16, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + i * 16))));
}

// 32 elements (a: 0..15, b: 16..31) split into even and odd ones, and back.
inline void split_even_odd(__m512 a, __m512 b, __m512& even, __m512& odd) {
  const __m512i e = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  even = _mm512_permutex2var_ps(a, e, b);
  odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(e, _mm512_set1_epi32(1)), b);
}
inline void join_even_odd(__m512 even, __m512 odd, __m512& a, __m512& b) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  a = _mm512_permutex2var_ps(even, lo, odd);
  b = _mm512_permutex2var_ps(even, _mm512_add_epi32(lo, _mm512_set1_epi32(8)), odd);
}

// scale * (q · key j) of rows [first, last) of a head block into s[j] (the
// others 0), widening the keys in registers: per key one fma chain, then the
// 16 sums reduced together, pairs of keys at a time (45 shuffles and adds,
// where transposing the block would cost ~80 per 16 dims: for one query per
// block the transpose costs more than the scores themselves).
template <KvType T, int D>
inline void scores_by_rows(const float* q, const uint8_t* block, const uint16_t* scales, int first, int last,
                           float scale, float* s) {
  __m512 a[kKeys];
  if constexpr (T == KvType::Q4) {
    static_assert(D % 2 == 0, "q4 rows are whole 32-element groups here");
    __m512 qe[D / 2], qo[D / 2];  // q is split even/odd (see attend_part)
    #pragma GCC unroll 8
    for (int g = 0; g < D / 2; ++g) {
      qe[g] = _mm512_loadu_ps(q + g * 32);
      qo[g] = _mm512_loadu_ps(q + g * 32 + 16);
    }
    alignas(64) float sf[kKeys * D / 2];
    q4_scales<D>(scales, sf);
    #pragma GCC unroll 16
    for (int j = 0; j < kKeys; ++j) {
      a[j] = _mm512_setzero_ps();
      if (j < first || j >= last) continue;
      #pragma GCC unroll 8
      for (int g = 0; g < D / 2; ++g) {
        __m512 even, odd;
        q4_group(block + j * D * 8 + g * 16, sf + j * (D / 2) + g, even, odd);
        a[j] = _mm512_fmadd_ps(qo[g], odd, _mm512_fmadd_ps(qe[g], even, a[j]));
      }
    }
  } else {
    #pragma GCC unroll 16
    for (int j = 0; j < kKeys; ++j) {
      a[j] = _mm512_setzero_ps();
      if (j < first || j >= last) continue;  // never loaded: may be another sequence's, or never written
      #pragma GCC unroll 16
      for (int c = 0; c < D; ++c)
        a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + c * 16), row_chunk<T, D>(block, j, c), a[j]);
    }
  }
  // Per 128-bit lane: b[i] = (key 2i, key 2i+1) pair sums, c[i] = keys 4i..4i+3 each summed over the lane.
  __m512 b[8], c[4];
  #pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
    c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  // Then across the four 128-bit lanes: lane L of the result holds keys 4L..4L+3.
  const __m512 e0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 e1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
  __m512 sum = _mm512_add_ps(_mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(3, 1, 3, 1)));
  if constexpr (T == KvType::Q8)  // the 16 rows' scales lie side by side
    sum = _mm512_mul_ps(sum, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales))));
  _mm512_store_ps(s, _mm512_mul_ps(sum, _mm512_set1_ps(scale)));
}

// add_values for one head over a q4 block, its output split even/odd (see
// attend_part) as q4_group gives the values.
template <int D>
inline void add_q4_values(float* out, const float* p, float corr, const uint8_t* block, const uint16_t* scales,
                          int j0, int j1) {
  alignas(64) float sf[kKeys * D / 2];
  q4_scales<D>(scales, sf);
  __m512 oe[D / 2], oo[D / 2];
  #pragma GCC unroll 8
  for (int g = 0; g < D / 2; ++g) {
    oe[g] = _mm512_loadu_ps(out + g * 32);
    oo[g] = _mm512_loadu_ps(out + g * 32 + 16);
    if (corr != 1.0f) {
      oe[g] = _mm512_mul_ps(oe[g], _mm512_set1_ps(corr));
      oo[g] = _mm512_mul_ps(oo[g], _mm512_set1_ps(corr));
    }
  }
  for (int j = j0; j < j1; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    #pragma GCC unroll 8
    for (int g = 0; g < D / 2; ++g) {
      __m512 even, odd;
      q4_group(block + j * D * 8 + g * 16, sf + j * (D / 2) + g, even, odd);
      oe[g] = _mm512_fmadd_ps(pj, even, oe[g]);
      oo[g] = _mm512_fmadd_ps(pj, odd, oo[g]);
    }
  }
  #pragma GCC unroll 8
  for (int g = 0; g < D / 2; ++g) {
    _mm512_storeu_ps(out + g * 32, oe[g]);
    _mm512_storeu_ps(out + g * 32 + 16, oo[g]);
  }
}

// Rows [first, last) of a q4 head block as f32 rows split even/odd per
// group, the others zero (for the transposed path).
template <int D>
const float* stage_q4_split(const uint8_t* block, size_t scales_offset, int first, int last, float* staged) {
  constexpr int hd = D * 16;
  if (first != 0 || last != kKeys) std::fill(staged, staged + kKeys * hd, 0.0f);
  alignas(64) float sf[kKeys * D / 2];
  q4_scales<D>(reinterpret_cast<const uint16_t*>(block + scales_offset), sf);
  for (int j = first; j < last; ++j)
    for (int g = 0; g < D / 2; ++g) {
      __m512 even, odd;
      q4_group(block + j * D * 8 + g * 16, sf + j * (D / 2) + g, even, odd);
      _mm512_store_ps(staged + j * hd + g * 32, even);
      _mm512_store_ps(staged + j * hd + g * 32 + 16, odd);
    }
  return staged;
}

// Each 32-element group of n rows of hd in place: split into even and odd
// elements, or joined back.
template <int D>
void split_rows(float* x, int n, bool join) {
  for (int i = 0; i < n * D / 2; ++i) {
    __m512 a = _mm512_loadu_ps(x + i * 32), b = _mm512_loadu_ps(x + i * 32 + 16);
    if (join)
      join_even_odd(a, b, a, b);
    else
      split_even_odd(a, b, a, b);
    _mm512_storeu_ps(x + i * 32, a);
    _mm512_storeu_ps(x + i * 32 + 16, b);
  }
}

// add_values for H heads with the value rows widened in registers (q8: the
// row's scale goes into the weight).
template <KvType T, int D, int H>
inline void add_values_by_rows(float* const* outs, const float* const* p, const float* corr, const uint8_t* block,
                               const uint16_t* scales, int j0, int j1) {
  __m512 o[H][D];
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c) {
      o[h][c] = _mm512_loadu_ps(outs[h] + c * 16);
      if (corr[h] != 1.0f) o[h][c] = _mm512_mul_ps(o[h][c], _mm512_set1_ps(corr[h]));
    }
  for (int j = j0; j < j1; ++j) {
    __m512 pj[H];
    const float row_scale = T == KvType::Q8 ? _cvtsh_ss(scales[j]) : 1.0f;
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) pj[h] = _mm512_set1_ps(p[h][j] * row_scale);
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c) {
      const __m512 vc = row_chunk<T, D>(block, j, c);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) o[h][c] = _mm512_fmadd_ps(pj[h], vc, o[h][c]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c) _mm512_storeu_ps(outs[h] + c * 16, o[h][c]);
}

// The cache's head block of KV head h in the block holding key `key`.
inline const uint8_t* head_block(const uint8_t* base, const PagedKv& kv, size_t head_stride, int32_t key, int32_t h) {
  return base + static_cast<size_t>(kv.block_ids[key / kKeys]) * kv.block_stride + h * head_stride;
}

template <KvType T, int D>
void attend_part(const float* q, int32_t n_heads, int32_t n_group, const PagedKv& kv, size_t head_stride,
                 int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  constexpr int hd = D * 16;
  constexpr int kHeads = D <= 4 ? 4 : D <= 8 ? 2 : 1;  // as in attend_rows
  // Below this many query heads per KV head, scores_by_rows; from it on, a
  // transpose shared by the group.
  constexpr int32_t kTransposeFrom = 4;
  alignas(64) float kt[hd][kKeys];
  alignas(64) float s[kMaxAttnGroup][kKeys];
  alignas(64) float staged_k[kKeys * hd];
  alignas(64) float staged_v[kKeys * hd];
  float corr[kMaxAttnGroup];
  const float* qs[kMaxAttnGroup];
  const float* p[kMaxAttnGroup];
  float* outs[kMaxAttnGroup];
  const size_t head_block_bytes = kKeys * kv_row_total_bytes(kv.type, hd);
  const int nq = n_heads * n_group;
  // q4 values come split even/odd per group (q4_group): queries and outputs
  // are split to match for the whole part, and joined back at its end.
  thread_local std::vector<float> q_split;  // kept from call to call: one per part and layer
  if constexpr (T == KvType::Q4) {
    q_split.assign(q, q + static_cast<size_t>(nq) * hd);
    split_rows<D>(q_split.data(), nq, false);
    split_rows<D>(out, nq, false);
    q = q_split.data();
  }
  // Head blocks (K and V) prefetched about 16 KiB ahead of the one computed:
  // for a q8 or q4 head block (1-2 KiB) one ahead arrives too late.
  const auto ahead = static_cast<int32_t>(std::max<size_t>(1, kPrefetchBytes / (2 * head_block_bytes)));
  // The head block read `ahead` after this one (next_h of the block holding
  // next_key): each is a page or less, and the jumps between blocks are ones
  // the hardware does not follow.
  int32_t next_h = ahead % n_heads, next_key = begin / kKeys * kKeys + ahead / n_heads * kKeys;
  for (int32_t blk0 = begin / kKeys * kKeys; blk0 < end; blk0 += kKeys) {
    const int first = std::max(begin, blk0) - blk0, last = std::min(end, blk0 + kKeys) - blk0;
    const auto valid = static_cast<__mmask16>(((1u << last) - 1) & ~((1u << first) - 1));
    for (int32_t h = 0; h < n_heads; ++h) {
      if (next_key < end) {
        prefetch_block(head_block(kv.k_base, kv, head_stride, next_key, next_h), head_block_bytes);
        if (kv.v_base != kv.k_base) prefetch_block(head_block(kv.v_base, kv, head_stride, next_key, next_h), head_block_bytes);
      }
      if (++next_h == n_heads) {  // no division per head block
        next_h = 0;
        next_key += kKeys;
      }
      const uint8_t* kb = head_block(kv.k_base, kv, head_stride, blk0, h);
      const uint8_t* vb = head_block(kv.v_base, kv, head_stride, blk0, h);
      const auto* k_scales = reinterpret_cast<const uint16_t*>(kb + kv.scales_offset);
      const auto* v_scales = reinterpret_cast<const uint16_t*>(vb + kv.scales_offset);
      const int32_t q0 = h * n_group;
      for (int g = 0; g < n_group; ++g) {
        qs[g] = q + static_cast<size_t>(q0 + g) * hd;
        outs[g] = out + static_cast<size_t>(q0 + g) * hd;
        p[g] = s[g];
      }
      if (n_group < kTransposeFrom) {
        // Few queries per row: keys and values widened in registers as they are used.
        for (int g = 0; g < n_group; ++g) scores_by_rows<T, D>(qs[g], kb, k_scales, first, last, scale, s[g]);
        for (int g = 0; g < n_group; ++g) corr[g] = softmax_step(s[g], valid, m[q0 + g], l[q0 + g]);
        for (int g = 0; g < n_group; ++g) {
          if constexpr (T == KvType::Q4)
            add_q4_values<D>(outs[g], p[g], corr[g], vb, v_scales, first, last);
          else
            add_values_by_rows<T, D, 1>(outs + g, p + g, corr + g, vb, v_scales, first, last);
        }
        continue;
      }
      // A group: the block widened and transposed once for all its queries.
      const float* k;
      const float* v;
      if constexpr (T == KvType::Q4) {
        k = stage_q4_split<D>(kb, kv.scales_offset, first, last, staged_k);
        v = stage_q4_split<D>(vb, kv.scales_offset, first, last, staged_v);
      } else {
        k = widen_rows<D>(kb, T, kv.scales_offset, first, last, staged_k);
        v = T == KvType::F32 ? reinterpret_cast<const float*>(vb)
                             : widen_rows<D>(vb, T, kv.scales_offset, first, last, staged_v);
      }
      transpose_keys<D>(k, kt);
      scores_any<D>(qs, n_group, kt, scale, s);
      for (int g = 0; g < n_group; ++g) corr[g] = softmax_step(s[g], valid, m[q0 + g], l[q0 + g]);
      int g = 0;
      for (; g + kHeads <= n_group; g += kHeads) add_values<D, kHeads>(outs + g, p + g, corr + g, v, first, last);
      for (; g < n_group; ++g) add_values<D, 1>(outs + g, p + g, corr + g, v, first, last);
    }
  }
  if constexpr (T == KvType::Q4) split_rows<D>(out, nq, true);
}

template <KvType T, int D>
bool part_if(const float* q, int32_t n_kv_heads, int32_t n_group, const PagedKv& kv, size_t head_stride,
             int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  if constexpr (T == KvType::Q4 && D % 2 != 0) {
    return false;  // q4 goes by whole 32-element groups
  } else {
    attend_part<T, D>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    return true;
  }
}

template <KvType T>
bool attend_part_of(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                    size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  switch (head_dim) {
    case 16: return part_if<T, 1>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 32: return part_if<T, 2>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 48: return part_if<T, 3>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 64: return part_if<T, 4>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 80: return part_if<T, 5>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 96: return part_if<T, 6>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 128: return part_if<T, 8>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 160: return part_if<T, 10>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    case 256: return part_if<T, 16>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    default: return false;
  }
}

}  // namespace

bool attend_part_avx512(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                        size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  if (kv.block_tokens != kKeys || n_group > kMaxAttnGroup) return false;
  switch (kv.type) {
    case KvType::F32: return attend_part_of<KvType::F32>(q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale, m, l, out);
    case KvType::F16: return attend_part_of<KvType::F16>(q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale, m, l, out);
    case KvType::Q8: return attend_part_of<KvType::Q8>(q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale, m, l, out);
    case KvType::Q4:
      return attend_part_of<KvType::Q4>(q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale, m, l, out);
  }
  return false;
}

bool attend_rows_avx512(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                            const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                            size_t out_stride) {
  if (kv.block_tokens != kKeys || n_rows > kMaxAttnRows || n_group > kMaxAttnGroup) return false;
  // q4 widens whole 32-element groups (head dims 32, 64, ..., 576).
  if (kv.type == KvType::Q4 && head_dim % (2 * kKeys) != 0) return false;
  switch (head_dim) {
    case 16: attend_rows<1>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 32: attend_rows<2>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 48: attend_rows<3>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 64: attend_rows<4>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 80: attend_rows<5>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 96: attend_rows<6>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 128: attend_rows<8>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    // Full K/V at DeepSeek-V2's mean of key and value widths (192 + 128) / 2,
    // for comparison, and its multi-head latent attention's one latent row
    // (512 + 64), which all 16 query heads read: here each block of keys is
    // widened and transposed once for all the heads.
    case 160: attend_rows<10>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 256: attend_rows<16>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    case 576: attend_rows<36>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride); return true;
    default: return false;
  }
}

}  // namespace duet
