// AVX2 versions of ops_avx512.cc's elementwise operations (SwiGLU, GeGLU
// and the sampler's shifted exp), for machines without AVX-512: the same
// vector exp in 8 lanes, tails by a copy through a zeroed buffer.
#include <immintrin.h>

#include <algorithm>

#include "kernels/ops.h"
#include "kernels/vec_math.h"

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
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, vec_math::exp<vec::Vec256>(_mm256_sub_ps(_mm256_setzero_ps(), g))));
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
    const __m256 gelu = _mm256_div_ps(x, _mm256_add_ps(one, vec_math::exp<vec::Vec256>(minus_2u)));
    _mm256_storeu_ps(op, _mm256_mul_ps(gelu, _mm256_loadu_ps(upp)));
  });
}

double exp_shifted_avx2(const float* x, float shift, double* out, int64_t n) {
  const __m128 s = _mm_set1_ps(shift);
  __m256d sum = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d e = vec_math::exp_d<vec::Vec256>(_mm256_cvtps_pd(_mm_sub_ps(_mm_loadu_ps(x + i), s)));
    _mm256_storeu_pd(out + i, e);
    sum = _mm256_add_pd(sum, e);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  double total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) {  // the tail (fewer than 4) by the same vector exp
    _mm256_store_pd(lanes, vec_math::exp_d<vec::Vec256>(_mm256_set1_pd(static_cast<double>(x[i] - shift))));
    total += out[i] = lanes[0];
  }
  return total;
}

}  // namespace duet
