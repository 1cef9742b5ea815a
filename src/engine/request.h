// What a caller asks of the engine, and what it hears back per token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace duet {

enum class FinishReason { kNone, kStop, kLength, kContext, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

struct RequestParams {
  SamplingParams sampling;
  int32_t max_tokens = 256;
  bool ignore_eos = false;
};

// Timings of one request, in seconds since it was submitted.
struct RequestTimings {
  double first_token = -1;          // TTFT; -1 until the first token
  std::vector<double> token_times;  // when each generated token was sampled
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  int32_t n_preemptions = 0;
};

struct TokenEvent {
  int64_t request_id = 0;
  int32_t token = -1;               // -1 when the event only reports the end
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  std::string error;                // set with kError
  const RequestTimings* timings = nullptr;
};

using TokenCallback = std::function<void(const TokenEvent&)>;

}  // namespace duet
