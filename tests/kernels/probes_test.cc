// The roofline probes' read loops: each level's plain, prefetching and
// side-by-side (2 and 4 streams) sums read every element once (the bandwidth they report is bytes / time, so a
// loop that skipped lines would overstate the ceiling).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/registry.h"

namespace duet {
namespace {

TEST(Probes, EveryReadLoopSumsEveryElement) {
  // Integers, so any order of float adds is exact: 64 * 300 floats of 0..15.
  std::vector<float> x(64 * 300);
  double want = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7) % 16);
    want += x[i];
  }
  for (CpuLevel level : testing::runnable_levels()) {
    const ProbeKernels& k = *kernels_at(level).probes();
    for (size_t r = 0; r < k.reads.size(); ++r) {
      EXPECT_EQ(k.reads[r](x.data(), x.size()), want) << cpu_level_name(level) << " read loop " << r;
      // One iteration: the first 64 hold 0..15 four times (the side-by-side
      // loops have no whole part per stream: all goes to their tail).
      EXPECT_EQ(k.reads[r](x.data(), 64), 4 * 120) << cpu_level_name(level) << " read loop " << r;
      // 298 chunks of 64: 4 streams of 74 and a tail of 2.
      EXPECT_EQ(k.reads[r](x.data(), 64 * 298), [&] {
        double s = 0;
        for (size_t i = 0; i < 64 * 298; ++i) s += x[i];
        return s;
      }()) << cpu_level_name(level) << " read loop " << r;
    }
  }
}

// The BF16 dot probe does the work it counts: 16 chains starting at j, each
// lane adding (1 x 1 + 1 x 1) per round, exact in f32 at this size.
TEST(Probes, Bf16DotProbeCountsItsWork) {
  if (!cpu_features().avx512bf16 || cpu_features().best_level() < CpuLevel::kAvx512)
    GTEST_SKIP() << "this CPU lacks AVX512_BF16";
  const ProbeKernels& k = *kernels_at(CpuLevel::kAvx512).probes();
  ASSERT_NE(k.bf16_flops, nullptr);
  float sink = 0;
  EXPECT_EQ(k.bf16_flops(1000, &sink), 4.0 * 16 * 16 * 1000);
  EXPECT_EQ(sink, 16.0f * (120 + 16 * 2 * 1000));
}

}  // namespace
}  // namespace duet
