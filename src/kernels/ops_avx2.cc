// AVX2 versions of ops_avx512.cc's elementwise operations (SwiGLU, GeGLU
// and the sampler's shifted exp), for machines without AVX-512: the same
// vector exp in 8 lanes, tails by a copy through a zeroed buffer.
#include <immintrin.h>

#include <algorithm>

#include "kernels/ops.h"
#include "kernels/vec_math_avx2.h"

namespace duet {
namespace {

// Calls f(gate, up, out) for each whole vector of 8, then once for the tail
// (fewer than 8) through buffers, so f loads and stores whole vectors only.
template <class F>
void by_vectors(const float* gate, const float* up, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) f(gate + i, up + i, out + i);
  if (i == n) return;
  float g[8] = {}, u[8] = {}, o[8];
  std::copy(gate + i, gate + n, g);
  std::copy(up + i, up + n, u);
  f(g, u, o);
  std::copy(o, o + (n - i), out + i);
}

}  // namespace

void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  by_vectors(gate, up, out, n, [&](const float* gp, const float* upp, float* op) {
    const __m256 g = _mm256_loadu_ps(gp);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, vec_math::exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(op, _mm256_mul_ps(silu, _mm256_loadu_ps(upp)));
  });
}

void geglu_tanh_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(-2.0f * 0.7978845608028654f),
               c3 = _mm256_set1_ps(0.044715f);
  // x * sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
  by_vectors(gate, up, out, n, [&](const float* gp, const float* upp, float* op) {
    const __m256 x = _mm256_loadu_ps(gp);
    const __m256 minus_2u = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(c3, x), _mm256_mul_ps(x, x), x));
    const __m256 gelu = _mm256_div_ps(x, _mm256_add_ps(one, vec_math::exp(minus_2u)));
    _mm256_storeu_ps(op, _mm256_mul_ps(gelu, _mm256_loadu_ps(upp)));
  });
}

namespace {

// 2^n for whole doubles n in [-1077, 1024] (two factors, as scale_by_pow2).
__m256d scale_by_pow2_pd(__m256d p, __m256d n) {
  const __m128i ni = _mm256_cvtpd_epi32(n);
  const __m128i half = _mm_srai_epi32(ni, 1), rest = _mm_sub_epi32(ni, half);
  const __m256i bias = _mm256_set1_epi64x(1023);
  const auto pow2 = [&](__m128i e) {
    return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(e), bias), 52));
  };
  return _mm256_mul_pd(_mm256_mul_pd(p, pow2(half)), pow2(rest));
}

// ops_avx512.cc's double exp in 4 lanes: x = n ln2 + r (ln2 in two parts),
// exp(r) by its degree-13 Taylor polynomial, times 2^n, which rounds results
// below 2^-1022 into subnormals and zero once, as std::exp does.
__m256d exp_pd(__m256d x) {
  x = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-746.0)), _mm256_set1_pd(709.0));
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  static constexpr double kInvFact[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800,
                                        1.0 / 362880,     1.0 / 40320,     1.0 / 5040,     1.0 / 720,
                                        1.0 / 120,        1.0 / 24,        1.0 / 6,        0.5,
                                        1.0,              1.0};
  __m256d p = _mm256_set1_pd(kInvFact[0]);
  for (int i = 1; i < 14; ++i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFact[i]));
  return scale_by_pow2_pd(p, n);
}

}  // namespace

double exp_shifted_avx2(const float* x, float shift, double* out, int64_t n) {
  const __m128 s = _mm_set1_ps(shift);
  __m256d sum = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d e = exp_pd(_mm256_cvtps_pd(_mm_sub_ps(_mm_loadu_ps(x + i), s)));
    _mm256_storeu_pd(out + i, e);
    sum = _mm256_add_pd(sum, e);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  double total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) {  // the tail (fewer than 4) by the same vector exp
    _mm256_store_pd(lanes, exp_pd(_mm256_set1_pd(static_cast<double>(x[i] - shift))));
    total += out[i] = lanes[0];
  }
  return total;
}

}  // namespace duet
