#include "server/prometheus.h"

#include <algorithm>
#include <cstdio>

#include "kv/block_table.h"

namespace duet::server {

namespace {

// One sample of a metric without labels.
struct Metric {
  const char* name;
  const char* type;
  const char* help;
  double value;
};

void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
  out += buf;
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  out += buf;
  int64_t cum = 0;
  for (size_t i = 0; i < h.upper_bounds().size(); ++i) {
    cum += h.counts()[i];
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %lld\n", name, h.upper_bounds()[i],
                  static_cast<long long>(cum));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.17g\n%s_count %lld\n", name,
                static_cast<long long>(h.count()), name, h.sum(), name,
                static_cast<long long>(h.count()));
  out += buf;
}

// One block pool's gauges: prefix_total, _used, _cached and _free.
void pool_metrics(std::string& out, const std::string& prefix, const std::string& what, const PoolGauges& g) {
  const std::pair<const char*, std::string> parts[] = {
      {"_total", what + " cache blocks"},
      {"_used", what + " blocks held by sequences"},
      {"_cached", "Unreferenced " + what + " blocks kept for the prefix cache"},
      {"_free", what + " blocks neither used nor cached"}};
  const int32_t values[] = {g.total, g.used, g.cached, g.free};
  for (size_t i = 0; i < 4; ++i)
    metric(out, (prefix + parts[i].first).c_str(), "gauge", parts[i].second.c_str(), values[i]);
}

// Per layer, a histogram over its experts of their load (tokens over the
// layer's mean): a balanced router puts every expert near 1.
void expert_load_metrics(std::string& out, const EngineMetrics& m) {
  const std::vector<LayerExpertLoad> layers = expert_loads(m.expert_tokens, m.n_experts);
  if (layers.empty()) return;
  static const double kBounds[] = {0.0, 0.25, 0.5, 0.8, 1.25, 2.0, 4.0};
  out += "# HELP duet_moe_expert_load Experts by load (tokens routed to the expert over the layer's mean), per layer\n"
         "# TYPE duet_moe_expert_load histogram\n";
  char buf[160];
  double worst = 0.0;
  for (const LayerExpertLoad& l : layers) {
    worst = std::max(worst, l.max());
    double sum = 0.0;
    for (double b : kBounds) {
      const auto below = std::count_if(l.load.begin(), l.load.end(), [&](double x) { return x <= b; });
      std::snprintf(buf, sizeof buf, "duet_moe_expert_load_bucket{layer=\"%d\",le=\"%g\"} %lld\n", l.layer, b,
                    static_cast<long long>(below));
      out += buf;
    }
    for (double x : l.load) sum += x;
    std::snprintf(buf, sizeof buf,
                  "duet_moe_expert_load_bucket{layer=\"%d\",le=\"+Inf\"} %zu\nduet_moe_expert_load_sum{layer=\"%d\"} %.17g\n"
                  "duet_moe_expert_load_count{layer=\"%d\"} %zu\n",
                  l.layer, l.load.size(), l.layer, sum, l.layer, l.load.size());
    out += buf;
  }
  metric(out, "duet_moe_expert_load_max", "gauge", "Largest expert load (tokens over its layer's mean) of any layer", worst);
}

}  // namespace

std::string prometheus_text(const EngineMetrics& m, int32_t in_flight) {
  std::string out;
  metric(out, "duet_requests_in_flight", "gauge", "Requests accepted and not finished", in_flight);
  metric(out, "duet_requests_waiting", "gauge", "Requests queued for the engine", m.waiting);
  metric(out, "duet_requests_running", "gauge", "Sequences in the running batch", m.running);
  out += "# HELP duet_requests_finished_total Finished requests by reason\n"
         "# TYPE duet_requests_finished_total counter\n";
  const FinishReason reasons[] = {FinishReason::kStop, FinishReason::kLength, FinishReason::kContext,
                                  FinishReason::kCancelled, FinishReason::kError};
  for (FinishReason r : reasons) {
    out += std::string("duet_requests_finished_total{reason=\"") + finish_reason_name(r) + "\"} " +
           std::to_string(m.finished_by_reason[static_cast<size_t>(r)]) + "\n";
  }
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const Metric counts[] = {
      {"duet_prompt_tokens_total", "counter", "Prompt tokens submitted", d(m.prompt_tokens)},
      {"duet_prompt_tokens_computed_total", "counter",
       "Prompt tokens run through the model (not found in the prefix cache, not shared by a fork of n > 1)",
       d(m.prompt_tokens_computed)},
      {"duet_forked_choices_total", "counter", "Choices of n > 1 requests forked off their first choice",
       d(m.forked_choices)},
      {"duet_fork_shared_blocks_total", "counter", "KV blocks forked choices took over from their parent",
       d(m.fork_shared_blocks)},
      {"duet_kv_block_copies_total", "counter", "Copy-on-write copies of shared KV blocks", d(m.kv_block_copies)},
      {"duet_embedding_tokens_total", "counter", "Input tokens embedded", d(m.embedding_tokens)},
      {"duet_generation_tokens_total", "counter", "Tokens generated", d(m.generated_tokens)},
      {"duet_generation_tokens_per_second", "gauge", "Tokens generated per second over the last 5 s",
       m.generated_tokens_per_second},
      {"duet_preemptions_total", "counter", "Sequences preempted for KV blocks", d(m.preemptions)},
      {"duet_engine_steps_total", "counter", "Batched forward passes", d(m.steps)},
      {"duet_spec_draft_tokens_total", "counter", "Speculative draft tokens proposed", d(m.spec_draft_tokens)},
      {"duet_spec_accepted_tokens_total", "counter", "Speculative draft tokens accepted by the target",
       d(m.spec_accepted_tokens)},
      {"duet_spec_verify_passes_total", "counter", "Sequence-steps that verified draft tokens",
       d(m.spec_verify_passes)},
      {"duet_spec_acceptance_rate", "gauge", "Accepted / proposed draft tokens since start", m.spec_acceptance_rate()},
      {"duet_spec_tokens_per_pass", "gauge", "Tokens a verifying target pass produced on average (accepted drafts + 1)",
       m.spec_verify_passes ? 1.0 + d(m.spec_accepted_tokens) / d(m.spec_verify_passes) : 0.0},
      {"duet_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache",
       d(m.prefix_query_tokens)},
      {"duet_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache", d(m.prefix_hit_tokens)},
      {"duet_prefix_cache_hit_rate", "gauge", "Prefix cache hits / queries (tokens)", m.prefix_hit_rate()},
  };
  for (const Metric& x : counts) metric(out, x.name, x.type, x.help, x.value);
  pool_metrics(out, "duet_kv_blocks", "KV", m.kv);
  // The one number a load-aware router compares across replicas (vLLM's
  // gpu_cache_usage_perc): cached blocks count as free, being reclaimable.
  metric(out, "duet_kv_usage_ratio", "gauge", "KV blocks held by sequences over all KV blocks (0..1)",
         m.kv.total > 0 ? static_cast<double>(m.kv.used) / m.kv.total : 0.0);
  pool_metrics(out, "duet_draft_kv_blocks", "Draft model KV", m.draft_kv);
  metric(out, "duet_kv_tokens_stored", "gauge", "Token slots filled in used KV blocks",
         static_cast<double>(m.kv_tokens_stored));
  metric(out, "duet_kv_token_slots_used", "gauge", "Token slots of used KV blocks",
         static_cast<double>(m.kv.used) * kBlockTokens);
  metric(out, "duet_kv_bytes_per_token", "gauge", "KV cache bytes of one token (K and V, all layers)",
         static_cast<double>(m.kv_bytes_per_token));
  metric(out, "duet_kv_cache_bytes", "gauge", "Bytes of the whole KV block pool",
         static_cast<double>(m.kv_bytes_total));
  out += "# HELP duet_kv_cache_type KV cache storage type (--kv-type), as a label\n"
         "# TYPE duet_kv_cache_type gauge\n"
         "duet_kv_cache_type{type=\"" + std::string(kv_type_name(m.kv_type)) + "\"} 1\n";
  histogram(out, "duet_time_to_first_token_seconds", "Time from submission to the first token", m.ttft);
  histogram(out, "duet_inter_token_latency_seconds", "Time between consecutive tokens of a request", m.itl);
  expert_load_metrics(out, m);
  return out;
}

}  // namespace duet::server
