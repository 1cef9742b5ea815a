#include "kernels/avx512_quiet.h"

#include "kernels/probes_simd.h"

namespace duet {

namespace {

// The BF16 dot peak, for BF16 prefill (packed_gemm_bf16_avx512.cc): 16
// chains, as the fma probe keeps its own latency covered.
[[gnu::target("avx512bf16")]] double bf16_flops(int64_t iters, float* sink) {
  constexpr int kChains = 16;
  __m512 a[kChains];
  for (int j = 0; j < kChains; ++j) a[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = x;  // (1.0, 1.0) pairs
  for (int64_t i = 0; i < iters; ++i) {
    #pragma GCC unroll 16
    for (auto& v : a) v = _mm512_dpbf16_ps(v, x, y);
  }
  __m512 s = a[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, a[j]);
  *sink = _mm512_reduce_add_ps(s);
  return 4.0 * 16 * kChains * static_cast<double>(iters);
}

constexpr ProbeKernels with_bf16(ProbeKernels k) {
  k.bf16_flops = &bf16_flops;
  return k;
}

}  // namespace

constexpr ProbeKernels kProbesAvx512 = with_bf16(probes_simd::kernels<vec::Vec512>());

}  // namespace duet
