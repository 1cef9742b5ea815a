#include "kernels/roofline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>
#include <vector>

#include "core/huge_buffer.h"
#include "core/cpu_features.h"
#include "kernels/registry.h"

namespace duet {
namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

Roofline measure_roofline(ThreadPool& pool, size_t bytes, int reps) {
  const ProbeKernels& k = *kernels().probes();
  Roofline r;
  r.threads = pool.size();

  const size_t n = (bytes / sizeof(float)) / 64 * 64;
  // In huge pages where the kernel grants them, as the weights are with
  // --no-mmap (a TLB miss per 2 MiB, not per 4 KiB); plain memory otherwise.
  Result<HugeBuffer> huge = HugeBuffer::allocate(n * sizeof(float), "read probe buffer");
  std::vector<float> plain;
  if (!huge) plain.resize(n);
  float* buf = huge ? reinterpret_cast<float*>(huge->data()) : plain.data();
  const auto slice = [n](int i, int nt) {
    return std::pair<size_t, size_t>{n * static_cast<size_t>(i) / nt / 64 * 64, n * (i + 1) / nt / 64 * 64};
  };
  // Each thread first touches the slice it will read, so pages are resident.
  pool.run([&](int i, int nt) {
    const auto [b, e] = slice(i, nt);
    std::fill(buf + b, buf + e, 1.0f);
  });
  std::atomic<float> sink{0};
  // Every read loop; the fastest counts.
  double read_s = 1e30;
  for (ReadLoop sum : k.reads)
    read_s = std::min(read_s, best_seconds(reps, [&] {
                        pool.run([&](int i, int nt) {
                          const auto [b, e] = slice(i, nt);
                          sink.fetch_add(sum(buf + b, e - b));
                        });
                      }));
  r.read_gb_s = static_cast<double>(n * sizeof(float)) / read_s / 1e9;

  constexpr int64_t kIters = 20'000'000;
  // Billions of operations per second of `probe` (which returns its count)
  // on every thread at once, the best of reps.
  const auto rate = [&](auto probe) {
    std::atomic<double> work{0};
    const double seconds = best_seconds(reps, [&] {
      work = 0;
      pool.run([&](int, int) {
        const double w = probe();
        double cur = work.load();
        while (!work.compare_exchange_weak(cur, cur + w)) {}
      });
    });
    return work.load() / seconds / 1e9;
  };
  r.fma_gflop_s = rate([&] {
    float s;
    const double w = k.fma_flops(kIters, &s);
    sink.fetch_add(s);
    return w;
  });
  r.int8_gop_s = rate([&] {
    int32_t s;
    const double w = k.int8_ops(kIters, &s);
    sink.fetch_add(static_cast<float>(s));
    return w;
  });
  if (k.bf16_flops && cpu_features().avx512bf16)
    r.bf16_gflop_s = rate([&] {
      float s;
      const double w = k.bf16_flops(kIters, &s);
      sink.fetch_add(s);
      return w;
    });
  return r;
}

}  // namespace duet
