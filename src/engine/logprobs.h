// Log-probabilities for OpenAI-style `logprobs`: the log-softmax of one raw
// logits row, and its most likely tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace duet {

// log(sum(exp(logits))) over logits[n_vocab], computed stably.
float log_sum_exp(const float* logits, int32_t n_vocab);

// The n most likely tokens with their log-probabilities (logit - lse), most
// likely first; ties go to the lower id.
std::vector<TokenLogprob> top_logprobs(const float* logits, int32_t n_vocab, int32_t n, float lse);

}  // namespace duet
