// AVX-512 attention over an f32 paged cache, for head dims that are whole
// vectors (16, 32, ..., 128). Per query head and block of up to 16 keys: 16
// dot products (one vector accumulator each, no horizontal sum per key),
// folded into one vector of 16 scores by a transposing reduction (45
// shuffles and adds instead of 16 full reductions); softmax weights for the
// 16 keys at once with a vector exp; then the weighted values added into the
// head's output row. Prefill spends most of its non-matmul time here: the
// scalar loops ran at ~1 GFLOP/s, 44 % of a 512-token prefill.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention.h"
#include "kernels/kv_kernels.h"
#include "kernels/vec_math_avx512.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace duet {
namespace {

constexpr int kKeys = 16;

// Lane j of the result = the sum of all lanes of a[j].
inline __m512 transpose_sum(const __m512 (&a)[kKeys]) {
  __m512 t[8], u[4], v[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: a0+a2, b0+b2, a1+a3, b1+b3
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane's sums of keys 4i..4i+3
    const __m512d c = _mm512_castps_pd(t[2 * i]), d = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  for (int i = 0; i < 2; ++i)  // pairs of 128-bit lanes summed
    v[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of one query (D vectors) against `len` <= 16 key rows.
template <int D, bool kFull>
inline __m512 scores(const __m512 (&q)[D], const float* k, int32_t len, float scale) {
  __m512 acc[kKeys];
  #pragma GCC unroll 16
  for (int j = 0; j < kKeys; ++j) {
    acc[j] = _mm512_setzero_ps();
    if (kFull || j < len) {
      #pragma GCC unroll 8
      for (int c = 0; c < D; ++c) acc[j] = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(k + (j * D + c) * 16), acc[j]);
    }
  }
  return _mm512_mul_ps(transpose_sum(acc), _mm512_set1_ps(scale));
}

template <int D>
void attend(const float* q, int32_t n_group, const PagedKv& kv, int32_t begin, int32_t end, float scale,
            float* out) {
  constexpr int32_t hd = D * 16;
  constexpr int kMaxGroup = 64;
  float m[kMaxGroup], l[kMaxGroup];
  std::fill(m, m + n_group, -std::numeric_limits<float>::infinity());
  std::fill(l, l + n_group, 0.0f);
  std::fill(out, out + static_cast<size_t>(n_group) * hd, 0.0f);
  alignas(64) float p[kKeys];
  for (int32_t start = begin; start < end;) {
    const int32_t in_block = start % kv.block_tokens;
    const int32_t len = std::min({kv.block_tokens - in_block, end - start, kKeys});
    const size_t block = static_cast<size_t>(kv.block_ids[start / kv.block_tokens]);
    const auto* k = reinterpret_cast<const float*>(kv.k_base + block * kv.block_stride) + in_block * hd;
    const auto* v = reinterpret_cast<const float*>(kv.v_base + block * kv.block_stride) + in_block * hd;
    start += len;
    const __mmask16 valid = static_cast<__mmask16>((1u << len) - 1);
    for (int32_t g = 0; g < n_group; ++g) {
      __m512 qv[D];
      #pragma GCC unroll 8
      for (int c = 0; c < D; ++c) qv[c] = _mm512_loadu_ps(q + g * hd + c * 16);
      const __m512 s = _mm512_mask_mov_ps(_mm512_set1_ps(-std::numeric_limits<float>::infinity()), valid,
                                          len == kKeys ? scores<D, true>(qv, k, len, scale)
                                                       : scores<D, false>(qv, k, len, scale));
      // Past the first blocks the running max rarely moves: then the sums
      // so far need no rescaling (the factor would be exactly 1).
      const float block_max = _mm512_reduce_max_ps(s);
      const bool rescale = block_max > m[g];
      const float new_max = rescale ? block_max : m[g];
      const float correction = rescale ? std::exp(m[g] - new_max) : 1.0f;
      const __m512 w = _mm512_maskz_mov_ps(valid, vec_math::exp(_mm512_sub_ps(s, _mm512_set1_ps(new_max))));
      l[g] = l[g] * correction + _mm512_reduce_add_ps(w);
      m[g] = new_max;
      _mm512_store_ps(p, w);
      float* og = out + g * hd;
      // Even and odd keys in separate sums: one chain of 16 dependent fmas
      // per output vector left this loop bound by fma latency.
      __m512 o[D], odd[D];
      #pragma GCC unroll 8
      for (int c = 0; c < D; ++c) {
        o[c] = _mm512_loadu_ps(og + c * 16);
        if (rescale) o[c] = _mm512_mul_ps(o[c], _mm512_set1_ps(correction));
        odd[c] = _mm512_setzero_ps();
      }
      int32_t j = 0;
      for (; j + 1 < len; j += 2) {
        const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
        #pragma GCC unroll 8
        for (int c = 0; c < D; ++c) {
          o[c] = _mm512_fmadd_ps(p0, _mm512_loadu_ps(v + j * hd + c * 16), o[c]);
          odd[c] = _mm512_fmadd_ps(p1, _mm512_loadu_ps(v + (j + 1) * hd + c * 16), odd[c]);
        }
      }
      if (j < len) {
        const __m512 pj = _mm512_set1_ps(p[j]);
        #pragma GCC unroll 8
        for (int c = 0; c < D; ++c) o[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + j * hd + c * 16), o[c]);
      }
      #pragma GCC unroll 8
      for (int c = 0; c < D; ++c) _mm512_storeu_ps(og + c * 16, _mm512_add_ps(o[c], odd[c]));
    }
  }
  for (int32_t g = 0; g < n_group; ++g) {
    const __m512 inv = _mm512_set1_ps(l[g] > 0.0f ? 1.0f / l[g] : 0.0f);
    for (int c = 0; c < D; ++c) _mm512_storeu_ps(out + g * hd + c * 16, _mm512_mul_ps(_mm512_loadu_ps(out + g * hd + c * 16), inv));
  }
}

}  // namespace

bool attend_f32_avx512(const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv, int32_t begin,
                       int32_t end, float scale, float* out) {
  switch (head_dim) {
    case 16: attend<1>(q, n_group, kv, begin, end, scale, out); return true;
    case 32: attend<2>(q, n_group, kv, begin, end, scale, out); return true;
    case 48: attend<3>(q, n_group, kv, begin, end, scale, out); return true;
    case 64: attend<4>(q, n_group, kv, begin, end, scale, out); return true;
    case 80: attend<5>(q, n_group, kv, begin, end, scale, out); return true;
    case 96: attend<6>(q, n_group, kv, begin, end, scale, out); return true;
    case 128: attend<8>(q, n_group, kv, begin, end, scale, out); return true;
    default: return false;
  }
}

}  // namespace duet
