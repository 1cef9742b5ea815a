// Vector math shared by the AVX2 kernels: vec_math_avx512.h's exp with 8
// lanes. Include only from *_avx2.cc files; the anonymous namespace gives
// each its own copy (see quant_simd.h).
#pragma once

#include <immintrin.h>

namespace duet::vec_math {
namespace {

// 2^n for whole floats n in [-145, 128], as two factors 2^(n/2) each in
// float's normal range: times p in [0.7, 1.5), the first product is exact and
// the second rounds once, into a subnormal where the result is one, as
// AVX-512's scalef does.
inline __m256 scale_by_pow2(__m256 p, __m256 n) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1), rest = _mm256_sub_epi32(ni, half);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, a), b);
}

// exp(x), relative error < 2e-7, the AVX-512 exp's steps and constants (the
// same bits): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts), exp(r) by
// its degree-6 Taylor polynomial, times 2^n. Inputs are clamped to
// [-100, 88.7]: below, 0 or a subnormal; above, the largest finite floats.
inline __m256 exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-100.0f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  return scale_by_pow2(p, n);
}

}  // namespace
}  // namespace duet::vec_math
