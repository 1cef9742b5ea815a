#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace duet {

float log_sum_exp(const float* logits, int32_t n_vocab) {
  const float m = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - m));
  return m + static_cast<float>(std::log(sum));
}

std::vector<TokenLogprob> top_logprobs(const float* logits, int32_t n_vocab, int32_t n, float lse) {
  n = std::clamp(n, 0, n_vocab);
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<TokenLogprob> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) out.push_back({ids[static_cast<size_t>(i)], logits[ids[static_cast<size_t>(i)]] - lse});
  return out;
}

}  // namespace duet
