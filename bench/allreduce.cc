// The cost of tensor parallelism's collectives on this machine
// (docs/scaling.md): under `mpirun -np N duet_allreduce [--json]`, the
// median time of an allreduce of the sizes a forward pass joins — a decode
// step's [batch][dim] floats and a prefill chunk's [512][dim], for dim 2048
// (TinyLlama-1.1B) and 8192 (Llama-2-70B) — and of a step's broadcast, from
// rank 0. Then t = latency + bytes / bandwidth from the smallest and the
// largest allreduce: the two numbers the scaling model takes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
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

struct Size {
  const char* what;
  size_t floats;
};

// t = latency + bytes / bandwidth from two points: the latency is the
// smallest message's time, the bandwidth the largest message's bytes over
// its time beyond that (a least-squares line is all the largest sizes and
// gives a negative latency).
struct Fit {
  double latency_us = 0, bandwidth_gb_s = 0;
};

Fit fit(const std::vector<double>& bytes, const std::vector<double>& us) {
  const double latency = us.front();
  return {latency, (bytes.back() - bytes.front()) / std::max(us.back() - latency, 1e-3) / 1e3};
}

}  // namespace

int main(int argc, char** argv) {
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  duet::Communicator& comm = duet::world();
  if (comm.size() < 2) {
    std::fprintf(stderr, "run under mpirun -np 2 (or more)\n");
    return 1;
  }
  const Size sizes[] = {{"tiny", 64},
                        {"decode dim 2048", 2048},
                        {"decode dim 8192", 8192},
                        {"decode 8 x 8192", 8 * 8192},
                        {"decode 32 x 8192", 32 * 8192},
                        {"prefill 512 x 2048", 512 * 2048},
                        {"prefill 512 x 8192", 512 * 8192}};
  if (comm.leads() && !json)
    std::printf("| op | floats | bytes | median µs | GB/s |\n|---|---|---|---|---|\n");
  std::vector<double> bytes, us;
  std::string rows;
  for (const Size& s : sizes) {
    std::vector<float> x(s.floats, 1.0f);
    const int reps = s.floats > 100000 ? 20 : 400;
    const double t = median_us(reps, [&] { comm.allreduce_sum(x.data(), s.floats); });
    bytes.push_back(static_cast<double>(s.floats * sizeof(float)));
    us.push_back(t);
    if (!comm.leads()) continue;
    if (json) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s{\"what\":\"%s\",\"bytes\":%zu,\"us\":%.2f}", rows.empty() ? "" : ",", s.what,
                    s.floats * sizeof(float), t);
      rows += buf;
    } else {
      std::printf("| allreduce %s | %zu | %zu | %.1f | %.2f |\n", s.what, s.floats, s.floats * sizeof(float), t,
                  bytes.back() / t / 1e3);
    }
  }
  // A decode step's announcement: a header and a few ints per sequence.
  std::vector<int> msg(64);
  const double bcast = median_us(400, [&] { comm.broadcast(msg.data(), msg.size() * sizeof(int)); });
  if (!comm.leads()) return 0;
  const Fit f = fit(bytes, us);
  if (json) {
    std::printf("{\"ranks\":%d,\"allreduce\":[%s],\"broadcast_us\":%.2f,\"latency_us\":%.2f,\"bandwidth_gb_s\":%.3f}\n",
                comm.size(), rows.c_str(), bcast, f.latency_us, f.bandwidth_gb_s);
  } else {
    std::printf("| broadcast | - | %zu | %.1f | - |\n", msg.size() * sizeof(int), bcast);
    std::printf("\n%d ranks: allreduce ≈ %.1f µs + bytes / %.2f GB/s (from the smallest and largest)\n",
                comm.size(), f.latency_us, f.bandwidth_gb_s);
  }
  return 0;
}
