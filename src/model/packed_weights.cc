#include "model/packed_weights.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "kernels/packed_gemm.h"

namespace duet {
namespace {

// A share of the copying: groups [g0, g1) of one tensor.
struct PackJob {
  const TensorView* from;
  uint8_t* to;
  int64_t g0, g1;
};

constexpr int64_t kGroupsPerJob = 64;

void run_jobs(const std::vector<PackJob>& jobs) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();)
      pack_weights(*jobs[i].from, jobs[i].to, jobs[i].g0, jobs[i].g1);
  };
  const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::vector<std::jthread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(work);
  work();
}

}  // namespace

Status PackedWeights::pack(std::span<const TensorView** const> slots) {
  std::map<const TensorView*, const TensorView*> packed;  // source -> copy
  std::vector<PackJob> jobs;
  for (const TensorView** slot : slots) {
    const TensorView& w = **slot;
    if (!packable(w)) continue;
    if (auto it = packed.find(&w); it != packed.end()) {
      *slot = it->second;
      continue;
    }
    auto e = std::make_unique<Entry>();
    DUET_ASSIGN(e->buffer, HugeBuffer::allocate(packed_bytes(w), w.name));
    e->view = w;
    e->view.data = e->buffer.data();
    e->view.packed = true;
    for (int64_t g = 0, n = w.rows() / kPackRows; g < n; g += kGroupsPerJob)
      jobs.push_back({&w, e->buffer.data(), g, std::min(n, g + kGroupsPerJob)});
    packed[&w] = *slot = &e->view;
    entries_.push_back(std::move(e));
  }
  run_jobs(jobs);
  for (const auto& e : entries_) DUET_TRY(e->buffer.seal());
  return {};
}

}  // namespace duet
