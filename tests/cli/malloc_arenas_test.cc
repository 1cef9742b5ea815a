// limit_malloc_arenas() (the setting `duet serve` starts with): threads that
// allocate afterwards all share the one arena instead of each making its own.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdio.h>

#include <cstdlib>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "cli/malloc_arenas.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUET_UNDER_ASAN
#endif
#endif

namespace duet::cli {
namespace {

// The arenas glibc has made so far: malloc_info writes one <heap> per arena.
int count_arenas() {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  malloc_info(0, f);
  fclose(f);
  const std::string s(text, size);
  free(text);
  int n = 0;
  for (size_t at = s.find("<heap nr="); at != std::string::npos; at = s.find("<heap nr=", at + 1)) ++n;
  return n;
}

// n threads that each allocate while all the others are alive (a thread
// that has ended hands its arena on to the next one).
void allocate_in_threads(int n) {
  std::latch all_allocated(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&] {
      void* volatile p = std::malloc(4096);
      all_allocated.arrive_and_wait();
      std::free(p);
    });
  for (std::thread& t : threads) t.join();
}

// In a fresh process (the death test's re-run of this binary), where no
// other test has made arenas yet.
TEST(MallocArenas, ThreadsShareOneArenaOnceLimited) {
#if defined(__SANITIZE_ADDRESS__) || defined(DUET_UNDER_ASAN)
  // ASan's allocator replaces glibc's arenas, so the count would be 1 either
  // way; the Release tree's soak (scripts/soak.sh) watches the effect.
  GTEST_SKIP() << "glibc malloc arenas are not used under AddressSanitizer";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        limit_malloc_arenas();
        allocate_in_threads(8);
        std::exit(count_arenas());  // unlimited, each of the 8 threads makes one: 9
      },
      ::testing::ExitedWithCode(1), "");
}

// Mapped blocks now: 1 when a 1 MiB block, asked for after a 6 MiB one was
// freed, still gets its own mapping (glibc's sliding threshold would have
// risen to 6 MiB and served it from the heap: 0).
int one_mib_block_mapped_after_a_larger_one() {
  void* volatile large = std::malloc(6 << 20);  // volatile: the pair is not elided
  std::free(large);
  void* volatile p = std::malloc(1 << 20);
  const int mapped = static_cast<int>(mallinfo2().hblks);
  std::free(p);
  return mapped;
}

TEST(MallocArenas, LargeBlocksStayMappedAfterALargerOneIsFreed) {
#if defined(__SANITIZE_ADDRESS__) || defined(DUET_UNDER_ASAN)
  GTEST_SKIP() << "glibc malloc's mmap threshold is not used under AddressSanitizer";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(one_mib_block_mapped_after_a_larger_one()), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        map_large_allocations();
        std::exit(one_mib_block_mapped_after_a_larger_one());
      },
      ::testing::ExitedWithCode(1), "");
}

}  // namespace
}  // namespace duet::cli
