// available_memory_bytes reads /proc/meminfo (and any cgroup limit): on
// Linux it is known, nonzero, and no more than the machine's memory.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <sstream>
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

TEST(ResidentMemory, ParsesTheStatusFields) {
  std::istringstream status(
      "Name:\tduet\nVmPeak:\t  999 kB\nVmRSS:\t    3000 kB\nRssAnon:\t    1000 kB\n"
      "RssFile:\t    1900 kB\nRssShmem:\t  100 kB\nThreads:\t2\n");
  const ResidentMemory r = parse_resident_memory(status);
  EXPECT_EQ(r.total, 3000u * 1024);
  EXPECT_EQ(r.anon, 1000u * 1024);
  EXPECT_EQ(r.file, 1900u * 1024);
  EXPECT_EQ(r.shmem, 100u * 1024);
  std::istringstream empty("");
  EXPECT_EQ(parse_resident_memory(empty).total, 0u);
}

// Touching a fresh anonymous buffer shows in the anonymous count; its pages
// going back (MADV_DONTNEED) take it away again.
TEST(ResidentMemory, FollowsAnonymousPagesTouchedAndReleased) {
  constexpr size_t kBytes = 64 << 20;
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const ResidentMemory before = resident_memory();
  ASSERT_GT(before.total, 0u);
  std::memset(p, 1, kBytes);
  const ResidentMemory touched = resident_memory();
  EXPECT_GE(touched.anon, before.anon + kBytes * 9 / 10);
  EXPECT_GE(touched.total, touched.anon);
  madvise(p, kBytes, MADV_DONTNEED);
  EXPECT_LE(resident_memory().anon, touched.anon - kBytes * 9 / 10);
  munmap(p, kBytes);
}

}  // namespace
}  // namespace duet
