#include "core/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DUET_PAUSE() _mm_pause()
#else
#define DUET_PAUSE() ((void)0)
#endif

namespace duet {
namespace {
// Spin this many pauses (~tens of microseconds) before sleeping: long enough
// to span the gap between two ops of a decode step, short enough not to burn
// a core between requests.
constexpr int kSpinIterations = 1 << 12;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = n_threads < 1 ? 1 : n_threads;
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::dispatch(Call call, void* ctx, bool optional) {
  if (n_threads_ == 1) {
    call(ctx, 0, 1);
    return;
  }
  call_ = call;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  const uint64_t tag = static_cast<uint64_t>(generation_.load(std::memory_order_relaxed) + 1) << 32;
  seats_.store(tag | static_cast<uint64_t>(n_threads_ - 1), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  call(ctx, 0, n_threads_);
  if (optional) {  // the work is done or taken: seats still open are not waited for
    const uint64_t open = seats_.exchange(tag, std::memory_order_acq_rel) & 0xffffffffu;
    pending_.fetch_sub(static_cast<int>(open), std::memory_order_acq_rel);
  }
  // Spin while the others finish, but yield once that takes long: on an
  // oversubscribed machine a worker may be waiting for this very core.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) DUET_PAUSE();
    else std::this_thread::yield();
  }
}

// A seat in the dispatch of `generation`, if one is still open.
bool ThreadPool::take_seat(uint32_t generation) {
  uint64_t v = seats_.load(std::memory_order_acquire);
  while ((v >> 32) == generation && (v & 0xffffffffu) > 0)
    if (seats_.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  return false;
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
      DUET_PAUSE();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (stop_.load(std::memory_order_relaxed)) return;
    if (!take_seat(g)) continue;  // let off: the caller finished without this worker
    call_(ctx_, index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace duet
