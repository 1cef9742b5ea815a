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
    dispatch([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); }, &fn);
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
    run([&](int, int) {
      for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
           c = next.fetch_add(1, std::memory_order_relaxed)) {
        const int64_t begin = c * grain;
        fn(begin, begin + grain < n ? begin + grain : n);
      }
    });
  }

 private:
  using Call = void (*)(void*, int, int);
  void dispatch(Call call, void* ctx);
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace duet
