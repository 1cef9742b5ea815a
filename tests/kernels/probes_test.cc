// The roofline probes' read loops: each level's plain and prefetching sums
// read every element once (the bandwidth they report is bytes / time, so a
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
    EXPECT_EQ(k.sum(x.data(), x.size()), want) << cpu_level_name(level);
    EXPECT_EQ(k.sum_prefetch(x.data(), x.size()), want) << cpu_level_name(level);
    // One iteration: the first 64 hold 0..15 four times.
    EXPECT_EQ(k.sum_prefetch(x.data(), 64), 4 * 120) << cpu_level_name(level);
  }
}

}  // namespace
}  // namespace duet
