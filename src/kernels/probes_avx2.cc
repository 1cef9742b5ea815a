#include <immintrin.h>

#include "kernels/probes.h"

namespace duet {
namespace {

// kPrefetch: software prefetch kProbePrefetchBytes ahead, a line at a time.
template <bool kPrefetch>
float sum(const float* x, size_t n) {
  constexpr size_t kAhead = kProbePrefetchBytes / sizeof(float);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 32) {
    if constexpr (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(x + i + kAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(x + i + 16 + kAhead), _MM_HINT_T0);
    }
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

double fma_flops(int64_t iters, float* sink) {
  // 10 independent chains cover the FMA latency × throughput product.
  __m256 a[10];
  for (int j = 0; j < 10; ++j) a[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a) v = _mm256_fmadd_ps(v, m, c);
  __m256 s = a[0];
  for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, a[j]);
  *sink = _mm256_cvtss_f32(s);
  return 2.0 * 8 * 10 * static_cast<double>(iters);
}

double int8_ops(int64_t iters, int32_t* sink) {
  // AVX2 has no dot-accumulate: maddubs (u8·s8 pairs → s16) + madd (→ s32) + add.
  __m256i a[8];
  for (auto& v : a) v = _mm256_setzero_si256();
  const __m256i x = _mm256_set1_epi8(3), y = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a)
      v = _mm256_add_epi32(v, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones));
  __m256i s = a[0];
  for (int j = 1; j < 8; ++j) s = _mm256_add_epi32(s, a[j]);
  *sink = _mm256_extract_epi32(s, 0);
  return 2.0 * 32 * 8 * static_cast<double>(iters);
}

const ProbeKernels kAvx2 = {sum<false>, sum<true>, fma_flops, int8_ops};

}  // namespace

const ProbeKernels& probe_kernels_avx2() { return kAvx2; }

}  // namespace duet
