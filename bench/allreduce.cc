// The cost of tensor parallelism's collectives on this machine
// (docs/scaling.md): under `mpirun -np N duet_allreduce`, the median time
// of an allreduce of each size (a decode step's [dim] floats up to a
// prefill chunk's [512][dim]) and of a step's broadcast, from rank 0.
// Latency is the small sizes' time; bandwidth is bytes over the large
// sizes' time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "dist/communicator.h"

namespace {

// Median microseconds of `reps` calls of fn, after a few to warm up.
template <class F>
double median_us(int reps, F&& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps + 5; ++i) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    const auto b = std::chrono::steady_clock::now();
    if (i >= 5) t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  duet::Communicator& comm = duet::world();
  if (comm.size() < 2) {
    std::fprintf(stderr, "run under mpirun -np 2 (or more)\n");
    return 1;
  }
  if (comm.leads()) std::printf("| op | floats | bytes | median µs | GB/s |\n|---|---|---|---|---|\n");
  for (size_t n : {size_t{64}, size_t{2048}, size_t{4096}, size_t{8192}, size_t{512} * 2048, size_t{512} * 8192}) {
    std::vector<float> x(n, 1.0f);
    const int reps = n > 100000 ? 20 : 400;
    const double us = median_us(reps, [&] { comm.allreduce_sum(x.data(), n); });
    if (comm.leads())
      std::printf("| allreduce | %zu | %zu | %.1f | %.2f |\n", n, n * sizeof(float), us, n * sizeof(float) / us / 1e3);
  }
  // A decode step's announcement: a header and a few ints per sequence.
  std::vector<int> msg(64);
  const double us = median_us(400, [&] { comm.broadcast(msg.data(), msg.size() * sizeof(int)); });
  if (comm.leads()) std::printf("| broadcast | - | %zu | %.1f | - |\n", msg.size() * sizeof(int), us);
  return 0;
}
