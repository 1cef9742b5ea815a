// Probes of this machine's ceilings, for the roofline that `duet bench`
// prints: how fast memory streams into the cores, and how many FMA and
// int8-dot operations (and, where the CPU has them, bf16 dots) the cores
// retire. Each probe is per-thread work; the
// caller runs it on every thread of a pool and adds the rates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>


namespace duet {

// The weight-streaming kernels' prefetch distance (packed_gemm_avx512.cc).
inline constexpr size_t kProbePrefetchBytes = 4096;

// Sums n floats (n a multiple of 64), reading each once; the result keeps
// the reads alive.
using ReadLoop = float (*)(const float* x, size_t n);

struct ProbeKernels {
  // The ways the read probe streams memory; the fastest is the ceiling, for
  // a ceiling that decode beats is no ceiling. One sequential stream; the
  // same prefetching kProbePrefetchBytes ahead, as the weight-streaming
  // kernels do (on some machines faster than the hardware prefetchers
  // alone); and the buffer as 2 and as 4 streams read side by side, which
  // keep more lines in flight: the packed decode kernels read a group's
  // scale lines ahead of its quants, two places at once, and drew 30-40 %
  // more from memory than one stream here.
  std::array<ReadLoop, 4> reads;
  // Runs `iters` rounds of independent FMAs; returns FLOPs done (2 per FMA lane).
  double (*fma_flops)(int64_t iters, float* sink);
  // Runs `iters` rounds of independent u8·s8 dot-accumulates (vpdpbusd where
  // present); returns integer ops done (2 per byte product).
  double (*int8_ops)(int64_t iters, int32_t* sink);
  // Runs `iters` rounds of independent vdpbf16ps (bf16 pair products into
  // f32); returns FLOPs done (4 per lane). nullptr below AVX-512; call only
  // where cpu_features().avx512bf16.
  double (*bf16_flops)(int64_t iters, float* sink) = nullptr;
};

extern const ProbeKernels kProbesScalar, kProbesAvx2, kProbesAvx512;

}  // namespace duet
