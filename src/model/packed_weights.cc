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
  // One buffer for the whole call: a buffer each would round every matrix up
  // to whole 2 MiB huge pages, which on small models cost more than the
  // weights themselves (stories110M: 197 MiB resident for 111 MiB packed).
  std::map<const TensorView*, size_t> offsets;  // source -> where its copy goes
  std::vector<const TensorView*> sources;
  size_t total = 0;
  for (const TensorView** slot : slots) {
    const TensorView& w = **slot;
    if (!packable(w) || offsets.contains(&w)) continue;
    offsets[&w] = total;
    sources.push_back(&w);
    total += (packed_bytes(w) + kAlign - 1) / kAlign * kAlign;
  }
  if (sources.empty()) return {};
  auto block = std::make_unique<Block>();
  DUET_ASSIGN(block->buffer, HugeBuffer::allocate(total, "packed weights"));
  std::map<const TensorView*, const TensorView*> packed;  // source -> copy
  std::vector<PackJob> jobs;
  for (const TensorView* w : sources) {
    uint8_t* to = block->buffer.data() + offsets[w];
    TensorView& view = block->views.emplace_back(*w);
    view.data = to;
    view.packed = true;
    for (int64_t g = 0, n = w->rows() / kPackRows; g < n; g += kGroupsPerJob)
      jobs.push_back({w, to, g, std::min(n, g + kGroupsPerJob)});
    packed[w] = &view;
    bytes_ += packed_bytes(*w);
    source_bytes_ += w->nbytes;
  }
  for (const TensorView** slot : slots)
    if (auto it = packed.find(*slot); it != packed.end()) *slot = it->second;
  run_jobs(jobs);
  DUET_TRY(block->buffer.seal());
  blocks_.push_back(std::move(block));
  return {};
}

}  // namespace duet
