#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace duet {
namespace {

TEST(ThreadPool, RunCallsEveryThreadOnce) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    ASSERT_EQ(pool.size(), n);
    for (int rep = 0; rep < 100; ++rep) {
      std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
      std::atomic<int> bad_n{0};
      pool.run([&](int i, int nt) {
        if (nt != n) bad_n.fetch_add(1);
        calls[static_cast<size_t>(i)].fetch_add(1);
      });
      ASSERT_EQ(bad_n.load(), 0);
      for (int i = 0; i < n; ++i) ASSERT_EQ(calls[static_cast<size_t>(i)].load(), 1) << "thread " << i;
    }
  }
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int n : {1, 2, 3, 4}) {
    ThreadPool pool(n);
    for (int64_t size : {0, 1, 2, 7, 16, 17, 100, 1000}) {
      for (int64_t grain : {1, 3, 16, 64}) {
        for (int rep = 0; rep < 3; ++rep) {
          std::vector<std::atomic<int>> hits(static_cast<size_t>(size));
          std::atomic<int> bad_bounds{0};
          pool.parallel_for(size, grain, [&](int64_t b, int64_t e) {
            // Boundaries other than the end fall on multiples of the grain.
            if (b >= e || b % grain != 0 || (e != size && e % grain != 0)) bad_bounds.fetch_add(1);
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          });
          ASSERT_EQ(bad_bounds.load(), 0) << "size " << size << " grain " << grain;
          for (int64_t i = 0; i < size; ++i)
            ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
                << "index " << i << " size " << size << " grain " << grain << " threads " << n;
        }
      }
    }
  }
}

TEST(ThreadPool, GuidedParallelForCoversEveryIndexOnceInShrinkingRanges) {
  for (int n : {1, 2, 3, 4}) {
    ThreadPool pool(n);
    for (int64_t size : {0, 1, 7, 32, 33, 100, 1000, 5632}) {
      for (int64_t unit : {1, 16, 32}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(size));
        std::atomic<int> bad_bounds{0}, calls{0};
        std::atomic<int64_t> first_len{0};
        pool.parallel_for_guided(size, unit, [&](int64_t b, int64_t e) {
          if (b >= e || b % unit != 0 || (e != size && e % unit != 0)) bad_bounds.fetch_add(1);
          if (b == 0) first_len = e - b;
          calls.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        ASSERT_EQ(bad_bounds.load(), 0) << "n=" << n << " size=" << size << " unit=" << unit;
        for (int64_t i = 0; i < size; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
        if (n > 1 && size >= 1000 && unit <= 32) {
          // The first range is about half of one thread's share, not all of
          // it, and the ranges after it shrink to the unit: a handful of
          // calls more than threads, far fewer than size / unit.
          EXPECT_LE(first_len.load(), size / (2 * n) + unit);
          EXPECT_GT(calls.load(), 2 * n);
          EXPECT_LT(calls.load(), size / unit / 2 + 2 * n);
        }
      }
    }
  }
}

TEST(ThreadPool, ManyBackToBackDispatches) {
  // Decode issues thousands of small ops; none may be lost or run twice.
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  const int reps = 5000;
  for (int rep = 0; rep < reps; ++rep)
    pool.parallel_for(10, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  EXPECT_EQ(total.load(), int64_t{10} * reps);
}

TEST(ThreadPool, WorkersLetOffAParallelForStillRunEveryRun) {
  // A parallel_for whose caller takes all the work lets off the workers
  // that have not started; the run() after it must still reach every
  // thread once, and no let-off worker may run a later region's call twice.
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  std::vector<std::atomic<int>> calls(4);
  const int reps = 3000;
  for (int rep = 0; rep < reps; ++rep) {
    pool.parallel_for(2, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
    pool.run([&](int i, int) { calls[static_cast<size_t>(i)].fetch_add(1); });
  }
  EXPECT_EQ(total.load(), int64_t{2} * reps);
  for (const auto& c : calls) EXPECT_EQ(c.load(), reps);
}

TEST(ThreadPool, CallerIsThreadZeroAndWritesAreVisible) {
  ThreadPool pool(2);
  std::vector<int> out(1000, 0);
  const auto caller = std::this_thread::get_id();
  std::thread::id seen0;
  pool.run([&](int i, int nt) {
    if (i == 0) seen0 = std::this_thread::get_id();
    for (size_t j = static_cast<size_t>(i); j < out.size(); j += static_cast<size_t>(nt))
      out[j] = static_cast<int>(j) + 1;
  });
  EXPECT_EQ(seen0, caller);
  for (size_t j = 0; j < out.size(); ++j) ASSERT_EQ(out[j], static_cast<int>(j) + 1);
}

}  // namespace
}  // namespace duet
