// available_memory_bytes reads /proc/meminfo (and any cgroup limit): on
// Linux it is known, nonzero, and no more than the machine's memory.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/memory_info.h"

namespace duet {
namespace {

uint64_t mem_total() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 0;
}

TEST(MemoryInfo, KnownAndWithinTheMachine) {
  const uint64_t total = mem_total();
  ASSERT_GT(total, 0u);
  const uint64_t avail = available_memory_bytes();
  EXPECT_GT(avail, 0u);
  EXPECT_LE(avail, total);
}

}  // namespace
}  // namespace duet
