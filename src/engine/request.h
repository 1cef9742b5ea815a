// What a caller asks of the engine, and what it hears back per token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace duet {

class Grammar;

enum class FinishReason { kNone, kStop, kLength, kContext, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

struct RequestParams {
  SamplingParams sampling;
  int32_t max_tokens = 256;
  bool ignore_eos = false;
  // Generation ends where the output text first contains one of these; the
  // stop string itself is not returned.
  std::vector<std::string> stop;
  // -1: off. N >= 0: every token event carries the log-probability of the
  // sampled token and the N most likely tokens, from the log-softmax of the
  // model's raw logits (before penalties, temperature and truncation).
  int32_t logprobs = -1;
  // The output text continues the prompt's (completions), so its first
  // piece keeps a leading space; false for a reply that starts anew.
  bool continues_prompt = true;
  // The output must be a string of this grammar (compiled by the front end
  // from GBNF or a JSON Schema): each step masks the tokens that cannot
  // continue it, end tokens are allowed only where it can end, and
  // generation stops once it is complete. Null: unconstrained. Speculative
  // drafts are cut at the first token the grammar rejects and verified
  // against masked rows.
  std::shared_ptr<const Grammar> grammar;
  // Choices (OpenAI's `n`): the prompt is prefilled once, then the sequence
  // forks into n that share the prompt's KV blocks (copy-on-write of the
  // last partial one). Choice i samples with seed + i; each reports its own
  // events (TokenEvent::choice) and ends on its own.
  int32_t n = 1;
};

// Timings of one request, in seconds since it was submitted.
struct RequestTimings {
  double first_token = -1;          // TTFT; -1 until the first token
  std::vector<double> token_times;  // when each generated token was sampled
  int32_t n_prompt = 0;
  int32_t n_cached = 0;             // prompt tokens reused from the prefix cache
  int32_t n_generated = 0;
  int32_t n_preemptions = 0;
  // Speculative decoding: draft tokens proposed and accepted, and target
  // forward passes that produced tokens (n_generated / n_passes tokens each).
  int32_t n_drafted = 0;
  int32_t n_accepted = 0;
  int32_t n_passes = 0;
  // Time spent computing and applying grammar masks and moving the
  // grammar past chosen tokens (what constrained decoding adds per token).
  double grammar_seconds = 0;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct TokenEvent {
  int64_t request_id = 0;
  int32_t choice = 0;               // of RequestParams::n
  int32_t token = -1;               // -1 when the event only reports the end
  // Newly released output text. Text that might begin a stop string is held
  // back until it cannot, so it may lag the tokens; the finishing event
  // carries whatever was still held.
  std::string text;
  float logprob = 0;                       // of `token`, with params.logprobs >= 0
  std::vector<TokenLogprob> top_logprobs;  // most likely first, params.logprobs of them
  bool finished = false;             // this choice's last event
  // Finished, and no other choice of the request is still running: the
  // request's last event.
  bool request_ended = false;
  FinishReason reason = FinishReason::kNone;
  std::string error;                // set with kError
  const RequestTimings* timings = nullptr;
};

using TokenCallback = std::function<void(const TokenEvent&)>;

}  // namespace duet
