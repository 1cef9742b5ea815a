// A persistent pool for per-op parallelism in the forward pass. Workers stay
// alive for the life of the pool and spin briefly before sleeping, so that
// a decode step's many small ops cost a wake-up each, not a thread creation.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace duet {

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 means all hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread (the caller is
  // thread 0) and returns when all calls have returned.
  template <class F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); }, &fn, false);
  }

  // Splits [0, n) into ranges of `grain` (the last may be shorter) and calls
  // fn(begin, end) for each, handing ranges out dynamically: a thread that
  // the OS delays on a busy machine holds up one range, not a fixed share.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t chunks = (n + grain - 1) / grain;
    if (chunks == 1 || n_threads_ == 1) {
      fn(int64_t{0}, n);
      return;
    }
    std::atomic<int64_t> next{0};
    help([&](int, int) {
      for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
           c = next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t begin = c * grain;
        fn(begin, begin + grain < n ? begin + grain : n);
      }
    });
  }

  // As parallel_for over [0, n) in multiples of `unit` (the last may be
  // shorter), but each range takes half the remainder's share per thread,
  // rounded up to a unit: few ranges while work is plentiful, small ones at
  // the end, so the threads finish together. A memory-bound decode matmul
  // split into equal ranges left ~5 % of a token's time waiting on the
  // thread with the last range.
  template <class F>
  void parallel_for_guided(int64_t n, int64_t unit, F&& fn) {
    if (n <= 0) return;
    if (unit < 1) unit = 1;
    if (n <= unit || n_threads_ == 1) {
      fn(int64_t{0}, n);
      return;
    }
    std::atomic<int64_t> next{0};
    const int64_t share = 2 * static_cast<int64_t>(n_threads_);
    help([&](int, int) {
      int64_t begin = next.load(std::memory_order_relaxed);
      for (;;) {
        if (begin >= n) return;
        int64_t len = (n - begin) / share;
        len = len < unit ? unit : (len + unit - 1) / unit * unit;
        const int64_t end = n - begin < len ? n : begin + len;
        if (!next.compare_exchange_weak(begin, end, std::memory_order_relaxed)) continue;
        fn(begin, end);
        begin = next.load(std::memory_order_relaxed);
      }
    });
  }

 private:
  using Call = void (*)(void*, int, int);
  // As run(), for work that any thread may take (shared counters): once
  // the caller's own call returns, workers that have not started are let
  // off, so the region does not wait for a worker the OS has descheduled.
  // On a loaded machine that wait was most of a small region's time (the
  // 1 MB router of a MoE layer: ~40 us of work, 190-560 us of wall time).
  template <class F>
  void help(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); }, &fn, true);
  }
  void dispatch(Call call, void* ctx, bool optional);
  bool take_seat(uint32_t generation);
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  // The open seats of the current dispatch, tagged with its generation
  // (generation << 32 | seats): a worker calls only after taking one, and
  // an optional dispatch's caller closes the rest when its own call ends.
  alignas(64) std::atomic<uint64_t> seats_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace duet
