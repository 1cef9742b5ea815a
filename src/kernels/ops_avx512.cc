// AVX-512 versions of the elementwise operations that cost real time: SwiGLU
// runs exp on every FFN activation (512 x 5632 per layer in a TinyLlama
// prefill), which the scalar loop did at ~5 ns each.
#include <immintrin.h>

#include "kernels/ops.h"
#include "kernels/vec_math.h"

#include "kernels/avx512_quiet.h"

namespace duet {

void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, vec_math::exp<vec::Vec512>(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, vec_math::exp<vec::Vec512>(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void geglu_tanh_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(-2.0f * 0.7978845608028654f),
               c3 = _mm512_set1_ps(0.044715f);
  // x * sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
  const auto gelu = [&](__m512 x) {
    const __m512 minus_2u = _mm512_mul_ps(c, _mm512_fmadd_ps(_mm512_mul_ps(c3, x), _mm512_mul_ps(x, x), x));
    return _mm512_div_ps(x, _mm512_add_ps(one, vec_math::exp<vec::Vec512>(minus_2u)));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(gelu(_mm512_loadu_ps(gate + i)), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(gelu(_mm512_maskz_loadu_ps(m, gate + i)), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

double exp_shifted_avx512(const float* x, float shift, double* out, int64_t n) {
  const __m256 s = _mm256_set1_ps(shift);
  __m512d sum = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d e = vec_math::exp_d<vec::Vec512>(_mm512_cvtps_pd(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
    _mm512_storeu_pd(out + i, e);
    sum = _mm512_add_pd(sum, e);
  }
  if (i < n) {
    const __mmask8 m = static_cast<__mmask8>((1u << (n - i)) - 1);
    const __m512d e = vec_math::exp_d<vec::Vec512>(_mm512_cvtps_pd(_mm256_sub_ps(_mm256_maskz_loadu_ps(m, x + i), s)));
    _mm512_mask_storeu_pd(out + i, m, e);
    sum = _mm512_add_pd(sum, _mm512_maskz_mov_pd(m, e));
  }
  return _mm512_reduce_add_pd(sum);
}

}  // namespace duet
