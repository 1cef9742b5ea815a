// Attention over a paged cache written once for both SIMD levels, on vec.h's
// width traits V (Vec256 in attention_avx2.cc, Vec512 in attention_avx512.cc),
// for head dims HD in whole 16-element chunks (16, ..., 128; 160, 256, and
// 576 for latent attention) and a tile of query rows (consecutive tokens of
// one sequence, each with the n_group heads of one KV head). f32 caches are
// read in place; f16, q8 and q4 rows are widened once per block and tile into
// f32 staging. Per 16-key block of the cache:
//   - K is transposed once (keys in lanes: a key row is 16 / kLanes
//     vectors), so a query's 16 scores are fma chains over the head dim with
//     no horizontal sums (a reduction per 16 keys and per query would cost
//     more than the fmas it sums), several queries at a time;
//   - per query, an online softmax over the block (vector exp; no rescaling
//     when the block does not raise the running max);
//   - the weighted values go into the outputs of up to 4 heads of a row at a
//     time (they share the row's keys), each V vector loaded once for them.
// A decode part (attend_part) runs the same steps per head block, every KV
// head of a cache block in turn, for one query row.
// Every query's arithmetic is the same whatever else shares its tile, so a
// row gets the bits it gets alone (decode) inside any prefill chunk. The two
// levels add in the same order here but for V::reduce_add's tree (a block's
// softmax sum); AVX-512's own decode path for small groups sums otherwise.
// Include only from attention_avx2.cc / attention_avx512.cc (see vec.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/vec_math.h"

namespace duet::attn_simd {
namespace {

constexpr int kKeys = 16;
constexpr int kMaxQueries = kMaxAttnQueries;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Queries scored at once: AVX2's 16 registers hold 6 x 2 accumulators,
// AVX-512's 32 hold 8 x 1 beside the keys.
template <class V>
constexpr int kScoreQueries = V::kLanes == 8 ? 6 : 8;

// Heads whose outputs are computed together (H), and output vectors per pass
// over the keys (C): what stays in registers.
template <class V, int HD>
constexpr int kValueHeads = V::kLanes == 8 ? 2 : HD <= 64 ? 4 : HD <= 128 ? 2 : 1;
template <class V, int HD>
constexpr int kValueChunk = V::kLanes == 8 ? (HD % 32 == 0 ? 4 : 2) : HD / 16;

// Lanes of keys [j0, j1) of a block, as 16 / kLanes masks.
template <class V>
struct KeyMask {
  typename V::M m[kKeys / V::kLanes];
  KeyMask(int j0, int j1) {
    for (int i = 0; i < kKeys / V::kLanes; ++i) m[i] = V::lanes_in(j0 - i * V::kLanes, j1 - i * V::kLanes);
  }
};

// kt[d] = element d of keys 0..15 (lane j: key j), for one block's 16 keys
// (rows of HD floats): kLanes x kLanes transposes.
template <class V, int HD>
void transpose_keys(const float* k, float (*kt)[kKeys]) {
  constexpr int n = V::kLanes;
  for (int part = 0; part < kKeys / n; ++part)
    for (int c = 0; c < HD / n; ++c) {
      typename V::F r[n];
      #pragma GCC unroll 16
      for (int j = 0; j < n; ++j) r[j] = V::load(k + (part * n + j) * HD + c * n);
      V::transpose(r);
      #pragma GCC unroll 16
      for (int e = 0; e < n; ++e) V::store(kt[c * n + e] + part * n, r[e]);
    }
}

// s[u] = scale * (q_u · keys), U queries at once (a fma chain per query and
// vector of keys, in d order).
template <class V, int HD, int U>
inline void scores(const float* const* qs, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  constexpr int n = kKeys / V::kLanes;
  typename V::F acc[U][n];
  #pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    for (int i = 0; i < n; ++i) acc[u][i] = V::zero();
  for (int d = 0; d < HD; ++d) {
    typename V::F kd[n];
    for (int i = 0; i < n; ++i) kd[i] = V::load(kt[d] + i * V::kLanes);
    #pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      const typename V::F qd = V::set1(qs[u][d]);
      for (int i = 0; i < n; ++i) acc[u][i] = V::fmadd(qd, kd[i], acc[u][i]);
    }
  }
  const typename V::F sc = V::set1(scale);
  #pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
    for (int i = 0; i < n; ++i) V::store(s[u] + i * V::kLanes, V::mul(acc[u][i], sc));
}

// scores for the n_left queries past the last whole kScoreQueries.
template <class V, int HD, int U = kScoreQueries<V> - 1>
inline void scores_tail(const float* const* qs, int n_left, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  if (n_left == U) return scores<V, HD, U>(qs, kt, scale, s);
  if constexpr (U > 1) scores_tail<V, HD, U - 1>(qs, n_left, kt, scale, s);
}

template <class V, int HD>
void scores_any(const float* const* qs, int n, const float (*kt)[kKeys], float scale, float (*s)[kKeys]) {
  constexpr int kU = kScoreQueries<V>;
  for (; n >= kU; n -= kU, qs += kU, s += kU) scores<V, HD, kU>(qs, kt, scale, s);
  scores_tail<V, HD>(qs, n, kt, scale, s);
}

// One query's softmax step over a block: turns its scores into weights (0
// outside `valid`), updates its running max and sum, and returns the factor
// its output so far must be scaled by (1 when the max did not move).
template <class V>
inline float softmax_step(float* s, const KeyMask<V>& valid, float& m, float& l) {
  constexpr int n = kKeys / V::kLanes;
  typename V::F x[n], w[n];
  for (int i = 0; i < n; ++i) x[i] = V::select(valid.m[i], V::load(s + i * V::kLanes), V::set1(kNegInf));
  typename V::F top = x[0];
  for (int i = 1; i < n; ++i) top = V::max(top, x[i]);
  const float block_max = V::reduce_max(top);
  const bool rescale = block_max > m;
  const float new_max = rescale ? block_max : m;
  const float correction = rescale ? std::exp(m - new_max) : 1.0f;
  const typename V::F mx = V::set1(new_max);
  for (int i = 0; i < n; ++i) w[i] = V::keep(valid.m[i], vec_math::exp<V>(V::sub(x[i], mx)));
  typename V::F sum = w[0];
  for (int i = 1; i < n; ++i) sum = V::add(sum, w[i]);
  l = l * correction + V::reduce_add(sum);
  m = new_max;
  for (int i = 0; i < n; ++i) V::store(s + i * V::kLanes, w[i]);
  return correction;
}

// Value rows stored as f32 rows of HD (staged, or an f32 block in place).
template <class V, int HD>
struct F32Rows {
  const float* v;
  static float scale(int) { return 1.0f; }  // of row j, taken into its weight
  typename V::F chunk(int j, int c) const { return V::load(v + j * HD + c * V::kLanes); }
};

// Output vectors [c0, c0 + C) of H heads of one row: outs[h] = outs[h] *
// corr[h] + sum_j p[h][j] v[j] over keys [j0, j1), one fma chain per output
// vector, in j order; rows gives v[j]'s vectors (F32Rows, or rows widened in
// registers).
template <class V, int H, int C, class Rows>
inline void add_values(float* const* outs, const float* const* p, const float* corr, const Rows& rows, int j0,
                       int j1, int c0) {
  constexpr int n = V::kLanes;
  typename V::F o[H][C];
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      o[h][c] = V::load(outs[h] + (c0 + c) * n);
      if (corr[h] != 1.0f) o[h][c] = V::mul(o[h][c], V::set1(corr[h]));
    }
  for (int j = j0; j < j1; ++j) {
    typename V::F pj[H];
    const float row_scale = rows.scale(j);
    #pragma GCC unroll 4
    for (int h = 0; h < H; ++h) pj[h] = V::set1(p[h][j] * row_scale);
    #pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const typename V::F vc = rows.chunk(j, c0 + c);
      #pragma GCC unroll 4
      for (int h = 0; h < H; ++h) o[h][c] = V::fmadd(pj[h], vc, o[h][c]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    #pragma GCC unroll 16
    for (int c = 0; c < C; ++c) V::store(outs[h] + (c0 + c) * n, o[h][c]);
}

template <class V, int HD, int H>
inline void add_values_all(float* const* outs, const float* const* p, const float* corr, const float* v, int j0,
                           int j1) {
  constexpr int C = kValueChunk<V, HD>;
  for (int c0 = 0; c0 < HD / V::kLanes; c0 += C) add_values<V, H, C>(outs, p, corr, F32Rows<V, HD>{v}, j0, j1, c0);
}

// The softmax step of n queries' scores s (their running m, l) over keys
// [j0, j1), and their values into outs, kValueHeads at a time. Inlined into
// attend_rows' loop over rows (out of line it measured 2-3 % slower there).
template <class V, int HD>
[[gnu::always_inline]] inline void weigh_values(float (*s)[kKeys], int n, const KeyMask<V>& valid, float* m,
                                                float* l, float* corr, float* const* outs, const float* v, int j0,
                                                int j1) {
  constexpr int kHeads = kValueHeads<V, HD>;
  const float* p[kMaxAttnGroup];
  for (int g = 0; g < n; ++g) corr[g] = softmax_step<V>(s[g], valid, m[g], l[g]);
  for (int g = 0; g < n; ++g) p[g] = s[g];
  int g = 0;
  for (; g + kHeads <= n; g += kHeads) add_values_all<V, HD, kHeads>(outs + g, p + g, corr + g, v, j0, j1);
  for (; g < n; ++g) add_values_all<V, HD, 1>(outs + g, p + g, corr + g, v, j0, j1);
}

// One quantized row widened to f32 (core/kv_format.h): q8 is int8 times the
// row's scale; q4 is 4-bit codes less 8 (element 2j in byte j's low nibble,
// 2j + 1 in its high one) times each 32-element group's scale. Products of
// exact values, so equal to kv_dequantize_row's.
template <class V, int HD>
inline void widen_q8(const uint8_t* row, uint16_t scale, float* out) {
  const typename V::F d = V::set1(_cvtsh_ss(scale));
  for (int c = 0; c < HD / V::kLanes; ++c) V::store(out + c * V::kLanes, V::mul(d, V::load_s8(row + c * V::kLanes)));
}

template <class V, int HD>
inline void widen_q4(const uint8_t* row, const uint16_t* scales, float* out) {
  static_assert(HD % 32 == 0, "q4 rows are whole 32-element groups here");
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int g = 0; g < HD / 32; ++g) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + g * 16));
    const __m128i lo = _mm_and_si128(b, low4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const typename V::F d = V::set1(_cvtsh_ss(scales[g]));
    V::store_s8x16(out + g * 32, _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight), d);  // elements 0..15
    V::store_s8x16(out + g * 32 + 16, _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight), d);
  }
}

// The rows [first, last) of one head block's K or V as f32 rows of HD, the
// others zero (the transposes read all 16; no row outside is ever weighted).
// A quantized block keeps its fp16 scales scales_offset bytes in.
template <class V, int HD>
const float* widen_rows(const uint8_t* block, KvType type, size_t scales_offset, int first, int last,
                        float* staged) {
  const bool whole = first == 0 && last == kKeys;
  if (type == KvType::F32 && whole) return reinterpret_cast<const float*>(block);
  if (!whole) std::fill(staged, staged + kKeys * HD, 0.0f);
  const auto* scales = reinterpret_cast<const uint16_t*>(block + scales_offset);
  switch (type) {
    case KvType::F32:
      std::memcpy(staged + first * HD, block + static_cast<size_t>(first) * HD * sizeof(float),
                  static_cast<size_t>(last - first) * HD * sizeof(float));
      break;
    case KvType::F16:
      for (int j = first; j < last; ++j)
        for (int c = 0; c < HD / V::kLanes; ++c)
          V::store(staged + j * HD + c * V::kLanes, V::load_f16(block + (j * HD + c * V::kLanes) * 2));
      break;
    case KvType::Q8:
      for (int j = first; j < last; ++j) widen_q8<V, HD>(block + j * HD, scales[j], staged + j * HD);
      break;
    case KvType::Q4:
      if constexpr (HD % 32 == 0)
        for (int j = first; j < last; ++j) widen_q4<V, HD>(block + j * HD / 2, scales + j * (HD / 32), staged + j * HD);
      break;
  }
  return staged;
}

// V rows [first, last) as f32: an f32 block in place (rows outside are never
// read, so no zeroing), the others widened.
template <class V, int HD>
const float* value_rows(const uint8_t* block, KvType type, size_t scales_offset, int first, int last, float* staged) {
  if (type == KvType::F32) return reinterpret_cast<const float*>(block);
  return widen_rows<V, HD>(block, type, scales_offset, first, last, staged);
}

// Asks for a head block of the next cache block while this one is computed:
// the blocks of one head are a block stride apart (every other head's and
// layer's rows lie between), a jump the hardware prefetcher does not follow.
inline void prefetch_block(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

template <class V, int HD>
void attend_rows(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, const PagedKv& kv,
                 const int32_t* begins, const int32_t* ends, float scale, float* out, size_t out_stride) {
  const int nq = n_rows * n_group;
  alignas(64) float kt[HD][kKeys];
  alignas(64) float s[kMaxQueries][kKeys];
  float m[kMaxQueries], l[kMaxQueries], corr[kMaxQueries];
  const float* qs[kMaxQueries];
  float* outs[kMaxQueries];
  for (int r = 0; r < n_rows; ++r)
    for (int g = 0; g < n_group; ++g) {
      qs[r * n_group + g] = q + r * q_stride + g * HD;
      outs[r * n_group + g] = out + r * out_stride + g * HD;
      std::fill(outs[r * n_group + g], outs[r * n_group + g] + HD, 0.0f);
    }
  std::fill(m, m + nq, kNegInf);
  std::fill(l, l + nq, 0.0f);
  const int32_t lo = *std::min_element(begins, begins + n_rows);
  const int32_t hi = *std::max_element(ends, ends + n_rows);
  // One head block: its 16 rows and their scales.
  const size_t head_block_bytes = kKeys * kv_row_total_bytes(kv.type, HD);
  alignas(64) float staged_k[kKeys * HD];
  alignas(64) float staged_v[kKeys * HD];
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
        widen_rows<V, HD>(kv.k_base + block * kv.block_stride, kv.type, kv.scales_offset, first, last, staged_k);
    const float* v =
        value_rows<V, HD>(kv.v_base + block * kv.block_stride, kv.type, kv.scales_offset, first, last, staged_v);
    transpose_keys<V, HD>(k, kt);
    scores_any<V, HD>(qs, nq, kt, scale, s);
    for (int r = 0; r < n_rows; ++r) {
      const int j0 = std::max(begins[r], blk0) - blk0, j1 = std::min(ends[r], blk0 + kKeys) - blk0;
      if (j0 >= j1) continue;  // nothing of this row in the block
      const int base = r * n_group;
      weigh_values<V, HD>(s + base, n_group, KeyMask<V>(j0, j1), m + base, l + base, corr + base, outs + base, v, j0,
                          j1);
    }
  }
  for (int i = 0; i < nq; ++i) {
    const typename V::F inv = V::set1(l[i] > 0.0f ? 1.0f / l[i] : 0.0f);
    for (int c = 0; c < HD / V::kLanes; ++c)
      V::store(outs[i] + c * V::kLanes, V::mul(V::load(outs[i] + c * V::kLanes), inv));
  }
}

// The cache's head block of KV head h in the block holding key `key`.
inline const uint8_t* head_block(const uint8_t* base, const PagedKv& kv, size_t head_stride, int32_t key, int32_t h) {
  return base + static_cast<size_t>(kv.block_ids[key / kKeys]) * kv.block_stride + h * head_stride;
}

// A decode part's walk (attention.h, attend_part_avx512): per cache block of
// [begin, end), every KV head h in turn, step(h, blk0, first, last, valid)
// over its keys [first, last) of the block; the head block about 16 KiB
// ahead is prefetched (for a q8 or q4 head block, 1-2 KiB, one ahead arrives
// too late).
template <class V, int HD, class Step>
void for_each_head_block(const PagedKv& kv, size_t head_stride, int32_t n_heads, int32_t begin, int32_t end,
                         Step step) {
  constexpr size_t kPrefetchBytes = 16 << 10;
  const size_t head_block_bytes = kKeys * kv_row_total_bytes(kv.type, HD);
  const auto ahead = static_cast<int32_t>(std::max<size_t>(1, kPrefetchBytes / (2 * head_block_bytes)));
  // The head block read `ahead` after this one (next_h of the block holding
  // next_key): each is a page or less, and the jumps between blocks are ones
  // the hardware does not follow.
  int32_t next_h = ahead % n_heads, next_key = begin / kKeys * kKeys + ahead / n_heads * kKeys;
  for (int32_t blk0 = begin / kKeys * kKeys; blk0 < end; blk0 += kKeys) {
    const int first = std::max(begin, blk0) - blk0, last = std::min(end, blk0 + kKeys) - blk0;
    const KeyMask<V> valid(first, last);
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
      step(h, blk0, first, last, valid);
    }
  }
}

// What a decode part keeps between head blocks: the group's queries against
// one head block at a time, by a transpose shared by the group.
template <class V, int HD>
struct PartGroup {
  alignas(64) float kt[HD][kKeys];
  alignas(64) float s[kMaxAttnGroup][kKeys];
  alignas(64) float staged_k[kKeys * HD];
  alignas(64) float staged_v[kKeys * HD];
  float corr[kMaxAttnGroup];
  const float* qs[kMaxAttnGroup];
  float* outs[kMaxAttnGroup];

  // The n_group queries of KV head h: at q (and out) + (h * n_group + g) * HD.
  void select(const float* q, float* out, int32_t h, int32_t n_group) {
    for (int g = 0; g < n_group; ++g) {
      qs[g] = q + static_cast<size_t>(h * n_group + g) * HD;
      outs[g] = out + static_cast<size_t>(h * n_group + g) * HD;
    }
  }
  // The selected queries over keys k and values v (f32 rows), keys [first, last).
  void attend(int32_t n_group, const float* k, const float* v, int first, int last, const KeyMask<V>& valid,
              float scale, float* m, float* l) {
    transpose_keys<V, HD>(k, kt);
    scores_any<V, HD>(qs, n_group, kt, scale, s);
    weigh_group(n_group, v, first, last, valid, m, l);
  }
  // weigh_values out of line: inlined into a decode part's walk over head
  // blocks it measured ~10 % slower for groups of 8 on AVX-512 (GCC 12).
  [[gnu::noinline]] void weigh_group(int32_t n_group, const float* v, int first, int last, const KeyMask<V>& valid,
                                     float* m, float* l) {
    weigh_values<V, HD>(s, n_group, valid, m, l, corr, outs, v, first, last);
  }
};

// Calls f(std::integral_constant<int, HD>) for the head dims the kernels
// take, with_latent: 576 as well; false for the others.
template <class F>
bool by_head_dim(int32_t head_dim, bool with_latent, F f) {
  switch (head_dim) {
    case 16: return f(std::integral_constant<int, 16>());
    case 32: return f(std::integral_constant<int, 32>());
    case 48: return f(std::integral_constant<int, 48>());
    case 64: return f(std::integral_constant<int, 64>());
    case 80: return f(std::integral_constant<int, 80>());
    case 96: return f(std::integral_constant<int, 96>());
    case 128: return f(std::integral_constant<int, 128>());
    // Full K/V at DeepSeek-V2's mean of key and value widths (192 + 128) / 2,
    // for comparison, and its multi-head latent attention's one latent row
    // (512 + 64), which all 16 query heads read: here each block of keys is
    // widened and transposed once for all the heads.
    case 160: return f(std::integral_constant<int, 160>());
    case 256: return f(std::integral_constant<int, 256>());
    case 576: return with_latent && f(std::integral_constant<int, 576>());
    default: return false;
  }
}

// attend_rows_avx2 / attend_rows_avx512 (attention.h).
template <class V>
bool attend_rows_any(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                     const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                     size_t out_stride) {
  if (kv.block_tokens != kKeys || n_rows > kMaxAttnRows || n_group > kMaxAttnGroup ||
      n_rows * n_group > kMaxAttnQueries)
    return false;
  // q4 widens whole 32-element groups (head dims 32, 64, ..., 576).
  if (kv.type == KvType::Q4 && head_dim % 32 != 0) return false;
  return by_head_dim(head_dim, true, [&](auto hd) {
    attend_rows<V, hd.value>(q, q_stride, n_rows, n_group, kv, begins, ends, scale, out, out_stride);
    return true;
  });
}

}  // namespace
}  // namespace duet::attn_simd
