// AVX-512 attention over a paged cache: attention_simd.h's kernels in 16-lane
// vectors (a 16-key block's key row is one vector: a query's 16 scores are
// one fma chain, 8 queries at a time), plus a decode part's own ways for
// groups of fewer than 4 query heads, where a transpose per head block costs
// more than the scores: keys and values widened in registers as they are
// used (scores_by_rows, add_values over BlockRows), q4 rows by table with their
// elements split even/odd (q4_group).
#include <vector>

#include "kernels/avx512_quiet.h"

#include "kernels/attention_simd.h"

namespace duet {
namespace {

using V = vec::Vec512;
using namespace attn_simd;

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

// K or V rows of a f32, f16 or q8 head block widened in registers, for
// scores_by_rows and add_values (q8: without the row's scale, which goes
// into the dot or the weight).
template <KvType T, int D>
struct BlockRows {
  const uint8_t* block;
  const uint16_t* scales;
  float scale(int j) const { return T == KvType::Q8 ? _cvtsh_ss(scales[j]) : 1.0f; }
  // Elements 16c..16c+15 of row j.
  __m512 chunk(int j, int c) const {
    const int at = j * D * 16 + c * 16;
    if constexpr (T == KvType::F32) {
      return V::load(reinterpret_cast<const float*>(block) + at);
    } else if constexpr (T == KvType::F16) {
      return V::load_f16(block + at * 2);
    } else {
      static_assert(T == KvType::Q8, "q4 goes by Q4Rows");
      return V::load_s8(block + at);
    }
  }
};

// The same for a q4 block, its rows split even/odd as q4_group gives them
// (chunk 2g: group g's even elements, 2g + 1: its odd ones), so the output
// is split too (see attend_part).
template <int D>
struct Q4Rows {
  const uint8_t* block;
  alignas(64) float sf[kKeys * D / 2];  // q4_scales
  Q4Rows(const uint8_t* b, const uint16_t* scales) : block(b) { q4_scales<D>(scales, sf); }
  static float scale(int) { return 1.0f; }
  __m512 chunk(int j, int c) const {
    __m512 even, odd;
    q4_group(block + j * D * 8 + c / 2 * 16, sf + j * (D / 2) + c / 2, even, odd);
    return c % 2 == 0 ? even : odd;
  }
};

template <KvType T, int D>
auto rows_of(const uint8_t* block, const uint16_t* scales) {
  if constexpr (T == KvType::Q4)
    return Q4Rows<D>(block, scales);
  else
    return BlockRows<T, D>{block, scales};
}

// scale * (q · key j) of rows [first, last) of a head block into s[j] (the
// others 0), widening the keys in registers: per key one fma chain, then the
// 16 sums reduced together, pairs of keys at a time (45 shuffles and adds,
// where transposing the block would cost ~80 per 16 dims: for one query per
// block the transpose costs more than the scores themselves).
template <KvType T, int D>
inline void scores_by_rows(const float* q, const uint8_t* block, const uint16_t* scales, int first, int last,
                           float scale, float* s) {
  const auto rows = rows_of<T, D>(block, scales);  // q4: q is split even/odd as its rows (see attend_part)
  __m512 a[kKeys];
  #pragma GCC unroll 16
  for (int j = 0; j < kKeys; ++j) {
    a[j] = _mm512_setzero_ps();
    if (j < first || j >= last) continue;  // never loaded: may be another sequence's, or never written
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c) a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + c * 16), rows.chunk(j, c), a[j]);
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

template <KvType T, int HD>
void attend_part(const float* q, int32_t n_heads, int32_t n_group, const PagedKv& kv, size_t head_stride,
                 int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  constexpr int D = HD / 16;
  constexpr int32_t kTransposeFrom = 4;
  const int nq = n_heads * n_group;
  // q4 values come split even/odd per group (q4_group): queries and outputs
  // are split to match for the whole part, and joined back at its end.
  thread_local std::vector<float> q_split;  // kept from call to call: one per part and layer
  if constexpr (T == KvType::Q4) {
    q_split.assign(q, q + static_cast<size_t>(nq) * HD);
    split_rows<D>(q_split.data(), nq, false);
    split_rows<D>(out, nq, false);
    q = q_split.data();
  }
  PartGroup<V, HD> w;
  for_each_head_block<V, HD>(kv, head_stride, n_heads, begin, end, [&](int32_t h, int32_t blk0, int first, int last,
                                                                       const KeyMask<V>& valid) {
    const uint8_t* kb = head_block(kv.k_base, kv, head_stride, blk0, h);
    const uint8_t* vb = head_block(kv.v_base, kv, head_stride, blk0, h);
    float* mh = m + h * n_group;
    float* lh = l + h * n_group;
    w.select(q, out, h, n_group);
    if (n_group < kTransposeFrom) {
      // Few queries per row: keys and values widened in registers as they are used.
      const auto* k_scales = reinterpret_cast<const uint16_t*>(kb + kv.scales_offset);
      const auto* v_scales = reinterpret_cast<const uint16_t*>(vb + kv.scales_offset);
      for (int g = 0; g < n_group; ++g) scores_by_rows<T, D>(w.qs[g], kb, k_scales, first, last, scale, w.s[g]);
      for (int g = 0; g < n_group; ++g) w.corr[g] = softmax_step<V>(w.s[g], valid, mh[g], lh[g]);
      for (int g = 0; g < n_group; ++g) {
        const float* p = w.s[g];
        add_values<V, 1, D>(w.outs + g, &p, w.corr + g, rows_of<T, D>(vb, v_scales), first, last, 0);
      }
      return;
    }
    if constexpr (T == KvType::Q4) {
      w.attend(n_group, stage_q4_split<D>(kb, kv.scales_offset, first, last, w.staged_k),
               stage_q4_split<D>(vb, kv.scales_offset, first, last, w.staged_v), first, last, valid, scale, mh, lh);
    } else {
      w.attend(n_group, widen_rows<V, HD>(kb, T, kv.scales_offset, first, last, w.staged_k),
               value_rows<V, HD>(vb, T, kv.scales_offset, first, last, w.staged_v), first, last, valid, scale, mh, lh);
    }
  });
  if constexpr (T == KvType::Q4) split_rows<D>(out, nq, true);
}

}  // namespace

bool attend_part_avx512(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                        size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  if (kv.block_tokens != kKeys || n_group > kMaxAttnGroup) return false;
  const auto part = [&](auto type) {
    constexpr KvType T = decltype(type)::value;
    return by_head_dim(head_dim, false, [&](auto hd) {
      if constexpr (T == KvType::Q4 && hd.value % 32 != 0) {
        return false;  // q4 goes by whole 32-element groups
      } else {
        attend_part<T, hd.value>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
        return true;
      }
    });
  };
  switch (kv.type) {
    case KvType::F32: return part(std::integral_constant<KvType, KvType::F32>());
    case KvType::F16: return part(std::integral_constant<KvType, KvType::F16>());
    case KvType::Q8: return part(std::integral_constant<KvType, KvType::Q8>());
    case KvType::Q4: return part(std::integral_constant<KvType, KvType::Q4>());
  }
  return false;
}

bool attend_rows_avx512(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                        const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                        size_t out_stride) {
  return attend_rows_any<V>(q, q_stride, n_rows, n_group, head_dim, kv, begins, ends, scale, out, out_stride);
}

}  // namespace duet
