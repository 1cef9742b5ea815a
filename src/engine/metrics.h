// What the engine counts about itself, for /metrics and benchmarks: request
// and token counters, latency histograms (Prometheus-style buckets), the
// prefix-cache hit rate, and gauges of the queue and the KV pool.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "core/kv_format.h"
#include "engine/request.h"

namespace duet {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // counts()[i]: observations <= upper_bounds()[i] (not cumulative); the
  // last entry counts those above every bound.
  const std::vector<int64_t>& counts() const { return counts_; }
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // [bounds + 1]
  int64_t count_ = 0;
  double sum_ = 0;
};

// How evenly a mixture of experts routes, per layer with experts: each
// expert's tokens over the layer's mean (1: its fair share; 0: idle).
struct LayerExpertLoad {
  int32_t layer = 0;
  uint64_t tokens = 0;        // routed in this layer (k per token)
  std::vector<double> load;   // [n_experts]
  double max() const;
  int32_t idle() const;       // experts that got no token
};

// counts: [layer][expert] tokens (Model::expert_token_counts). Layers that
// routed nothing (dense ones) are left out.
std::vector<LayerExpertLoad> expert_loads(const std::vector<uint64_t>& counts, int32_t n_experts);

// One KV block pool's blocks by state.
struct PoolGauges {
  int32_t total = 0;
  int32_t used = 0;    // held by a sequence
  int32_t cached = 0;  // unreferenced, kept for the prefix cache
  int32_t free = 0;    // neither
};

struct EngineMetrics {
  EngineMetrics();

  // Counters since start.
  std::array<int64_t, 6> finished_by_reason{};  // indexed by FinishReason
  int64_t prompt_tokens = 0;
  // Prompt tokens run through the model: those neither found in the prefix
  // cache nor shared by a fork (RequestParams::n), counted again when a
  // preempted sequence is recomputed.
  int64_t prompt_tokens_computed = 0;
  int64_t forked_choices = 0;      // sequences forked off a request's first choice
  int64_t fork_shared_blocks = 0;  // KV blocks those forks took over from their parent
  int64_t kv_block_copies = 0;     // copy-on-write copies of shared blocks
  int64_t embedding_tokens = 0;  // embedding input tokens run, counted as each pass runs
  int64_t generated_tokens = 0;
  int64_t prefix_query_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;    // of those, found there
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t kv_evicted_tokens = 0;     // dropped from the cache by a KV window
  int64_t spec_draft_tokens = 0;     // proposed by the drafter
  int64_t spec_accepted_tokens = 0;  // of those, accepted by the target
  int64_t spec_verify_passes = 0;    // sequence-steps that verified drafts
  Histogram ttft;  // seconds
  Histogram itl;   // seconds

  // Gauges, as of the last step.
  int32_t waiting = 0;
  int32_t running = 0;
  PoolGauges kv;        // the target model's cache
  PoolGauges draft_kv;  // the draft model's (all zero without one)
  int64_t kv_tokens_stored = 0;  // distinct token slots filled in used blocks
  // The cache's fixed facts, so a scrape shows what --kv-type bought.
  KvType kv_type = KvType::F32;
  int64_t kv_bytes_per_token = 0;  // K and V of one token, all layers
  int64_t kv_bytes_total = 0;      // the whole block pool
  double generated_tokens_per_second = 0;  // over the last few seconds
  // Of a mixture of experts: tokens routed to each expert since start,
  // [layer][expert] (empty for a dense model).
  std::vector<uint64_t> expert_tokens;
  int32_t n_experts = 0;

  double spec_acceptance_rate() const {
    return spec_draft_tokens ? static_cast<double>(spec_accepted_tokens) / spec_draft_tokens : 0;
  }
  double prefix_hit_rate() const {
    return prefix_query_tokens ? static_cast<double>(prefix_hit_tokens) / prefix_query_tokens : 0;
  }
};

// Output tokens per second over a sliding window of steps.
class RateMeter {
 public:
  explicit RateMeter(double window_s) : window_(window_s) {}
  void add(double now_s, int64_t n);
  double rate(double now_s);

 private:
  double window_;
  std::deque<std::pair<double, int64_t>> events_;
  int64_t total_ = 0;
};

}  // namespace duet
