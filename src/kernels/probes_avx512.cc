#include <immintrin.h>

#include "kernels/probes.h"

// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment,
// which -Wall reports at every inlined use; nothing here reads such a value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace duet {
namespace {

// kPrefetch: software prefetch kProbePrefetchBytes ahead, a line at a time.
template <bool kPrefetch>
float sum(const float* x, size_t n) {
  constexpr size_t kAhead = kProbePrefetchBytes / sizeof(float);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 64) {
    if constexpr (kPrefetch)
      for (size_t line = 0; line < 64; line += 16)
        _mm_prefetch(reinterpret_cast<const char*>(x + i + line + kAhead), _MM_HINT_T0);
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

double fma_flops(int64_t iters, float* sink) {
  __m512 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a) v = _mm512_fmadd_ps(v, m, c);
  __m512 s = a[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, a[j]);
  *sink = _mm512_reduce_add_ps(s);
  return 2.0 * 16 * 12 * static_cast<double>(iters);
}

double int8_ops(int64_t iters, int32_t* sink) {
  __m512i a[12];
  for (auto& v : a) v = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a) v = _mm512_dpbusd_epi32(v, x, y);
  __m512i s = a[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_epi32(s, a[j]);
  // Lane 0 only: the lanes' sum overflows int32 (the vector adds wrap; a
  // reduction in int is undefined behaviour, which UBSan reports).
  *sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
  return 2.0 * 64 * 12 * static_cast<double>(iters);
}

const ProbeKernels kAvx512 = {sum<false>, sum<true>, fma_flops, int8_ops};

}  // namespace

const ProbeKernels& probe_kernels_avx512() { return kAvx512; }

}  // namespace duet
