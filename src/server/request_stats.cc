#include "server/request_stats.h"

#include <algorithm>

namespace duet::server {

using nlohmann::json;

namespace {

int32_t prefilled_tokens(const RequestTimings& t) { return std::max(1, t.n_prompt - t.n_cached); }
int32_t decode_steps(const RequestTimings& t) { return std::max<int32_t>(0, static_cast<int32_t>(t.token_times.size()) - 1); }

json share_of_ceiling(double ideal_s, double measured_s, double ceiling) {
  if (ceiling <= 0 || measured_s <= 0) return nullptr;
  return 100.0 * ideal_s / measured_s;
}

json per_second(double n, double seconds) { return seconds > 0 ? json(n / seconds) : json(nullptr); }

}  // namespace

PhaseVerdict judge_phases(const RequestTimings& t, const RooflineBasis& roof) {
  PhaseVerdict v;
  v.prefill_s = std::max(0.0, t.first_token);
  const int32_t steps = decode_steps(t);
  v.decode_s = steps > 0 ? t.token_times.back() - t.token_times.front() : 0.0;
  if (roof.compute_gop_s > 0)
    v.prefill_ideal_s = (prefilled_tokens(t) * roof.flops_per_token + roof.head_flops) / (roof.compute_gop_s * 1e9);
  if (roof.read_gb_s > 0) {
    // Each step reads every weight and the KV of the context so far: on
    // average the prompt and half of what this answer added.
    const double kv_positions = t.n_prompt + steps / 2.0;
    const double bytes = steps * (roof.weight_bytes + roof.kv_bytes_per_pos * kv_positions);
    v.decode_ideal_s = bytes / (roof.read_gb_s * 1e9);
  }
  // The phase that lost the more time against what its ceiling allows is
  // the one that held the answer up.
  v.slow_to_start = v.prefill_s - v.prefill_ideal_s > v.decode_s - v.decode_ideal_s;
  return v;
}

json request_stats_json(const RequestTimings& t, const RooflineBasis& roof) {
  const PhaseVerdict v = judge_phases(t, roof);
  const int32_t steps = decode_steps(t);
  return {{"prompt_n", t.n_prompt},
          {"cached_n", t.n_cached},
          {"predicted_n", t.n_generated},
          {"ttft_ms", v.prefill_s * 1e3},
          {"itl_ms", steps > 0 ? json(v.decode_s / steps * 1e3) : json(nullptr)},
          {"predicted_ms", v.decode_s * 1e3},
          {"prompt_per_second", per_second(prefilled_tokens(t), v.prefill_s)},
          {"predicted_per_second", per_second(steps, v.decode_s)},
          {"prefill_pct_of_ceiling", share_of_ceiling(v.prefill_ideal_s, v.prefill_s, roof.compute_gop_s)},
          {"decode_pct_of_ceiling", share_of_ceiling(v.decode_ideal_s, v.decode_s, roof.read_gb_s)},
          {"verdict", v.slow_to_start ? "slow to start" : "slow to stream"},
          {"bound", v.slow_to_start ? "prefill" : "decode"}};
}

}  // namespace duet::server
