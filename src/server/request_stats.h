// Each answer's own figures, for the chat page and any client that wants
// them: TTFT, inter-token latency, rates, and which phase held the answer
// up, judged against the machine's measured ceilings. Returned as an extra
// "timings" object beside OpenAI's "usage" (the whole response, or the
// usage chunk of a stream that asks for stream_options.include_usage).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace duet::server {

// What one token costs the model and what the machine can do, measured when
// the server starts (`duet serve`, the probes of `duet bench --roofline`).
// A ceiling of 0 is unknown: the phases are then compared by time alone.
struct RooflineBasis {
  double read_gb_s = 0;          // decode's ceiling: streaming read bandwidth
  double compute_gop_s = 0;      // prefill's: FMA peak (float weights) or int8-dot peak
  double weight_bytes = 0;       // read once per decode step
  double kv_bytes_per_pos = 0;   // KV read per decode step, per position in the context
  double flops_per_token = 0;    // matmul work of one prompt token through the layers
  double head_flops = 0;         // and of the first token's row of logits
};

// Where an answer's time went beyond what the ceilings allow: before its
// first token (prefill and queueing) or while streaming the rest (decode).
struct PhaseVerdict {
  double prefill_ideal_s = 0, decode_ideal_s = 0;  // at the ceilings
  double prefill_s = 0, decode_s = 0;              // measured
  bool slow_to_start = false;
};

PhaseVerdict judge_phases(const RequestTimings& t, const RooflineBasis& roof);

// {"prompt_n", "cached_n", "predicted_n", "ttft_ms", "itl_ms",
//  "predicted_ms", "prompt_per_second", "predicted_per_second",
//  "prefill_pct_of_ceiling", "decode_pct_of_ceiling" (null when unknown),
//  "verdict": "slow to start" | "slow to stream", "bound": "prefill" | "decode"}
nlohmann::json request_stats_json(const RequestTimings& t, const RooflineBasis& roof);

}  // namespace duet::server
