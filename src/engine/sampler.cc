#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace duet {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() {
  // 53 random bits: the same stream on every platform, unlike std distributions.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_penalties(float* logits, int32_t n_vocab, const std::vector<int32_t>& history) {
  const bool repeat = params_.repeat_penalty != 1.0f;
  if (!repeat && params_.frequency_penalty == 0.0f && params_.presence_penalty == 0.0f) return;
  const size_t window = params_.repeat_last_n < 0
                            ? history.size()
                            : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
  counts_.assign(static_cast<size_t>(n_vocab), 0);
  for (size_t i = history.size() - window; i < history.size(); ++i) {
    const int32_t t = history[i];
    if (t >= 0 && t < n_vocab) ++counts_[static_cast<size_t>(t)];
  }
  for (size_t i = history.size() - window; i < history.size(); ++i) {
    const int32_t t = history[i];
    if (t < 0 || t >= n_vocab) continue;
    int32_t& c = counts_[static_cast<size_t>(t)];
    if (c == 0) continue;  // already penalized
    float& l = logits[t];
    if (repeat) l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    l -= static_cast<float>(c) * params_.frequency_penalty + params_.presence_penalty;
    c = 0;
  }
}

int32_t Sampler::sample(float* logits, int32_t n_vocab, const std::vector<int32_t>& history) {
  apply_penalties(logits, n_vocab, history);
  if (params_.temperature <= 0.0f)
    return static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);

  candidates_.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i)
    candidates_[static_cast<size_t>(i)] = {logits[i] / params_.temperature, i};
  const auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                      candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }

  // Probabilities of the kept candidates (sorted, so the first is the max).
  const float max_logit = candidates_[0].logit;
  probs_.resize(n);
  std::vector<double>& probs = probs_;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i)
    total += probs[i] = std::exp(static_cast<double>(candidates_[i].logit - max_logit));
  for (double& p : probs) p /= total;

  size_t keep = n;
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      cum += probs[i];
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    const double floor = probs[0] * params_.min_p;
    size_t i = 1;
    while (i < keep && probs[i] >= floor) ++i;
    keep = i;
  }

  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += probs[i];
  double r = uniform() * mass;
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r < 0.0) return candidates_[i].id;
  }
  return candidates_[keep - 1].id;
}

}  // namespace duet
