// This machine's ceilings, measured: read bandwidth from DRAM and the peak
// FMA and int8-dot rates of the cores, with a given number of threads.
// `duet bench --roofline` reports every phase as a fraction of these.
#pragma once

#include <cstddef>

#include "core/thread_pool.h"

namespace duet {

struct Roofline {
  int threads = 0;
  double read_gb_s = 0;     // streaming read of a buffer far larger than the caches
  double fma_gflop_s = 0;   // fp32 FMA, 2 FLOPs per lane
  double int8_gop_s = 0;    // u8·s8 dot-accumulate, 2 ops per byte product
  double bf16_gflop_s = 0;  // vdpbf16ps, 2 FLOPs per bf16 product; 0 where the CPU lacks it
};

// Best of `reps` runs of each probe on every thread of `pool`; `bytes` is the
// size of the streamed buffer (the default is far larger than any L3).
Roofline measure_roofline(ThreadPool& pool, size_t bytes = size_t{1} << 30, int reps = 3);

}  // namespace duet
