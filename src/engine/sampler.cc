#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace duet {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() {
  // 53 random bits: the same stream on every platform, unlike std distributions.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_penalties(float* logits, int32_t n_vocab, std::span<const int32_t> history) {
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

int32_t Sampler::sample(float* logits, int32_t n_vocab, std::span<const int32_t> history) {
  distribution(logits, n_vocab, history, dist_);
  return draw(dist_);
}

void Sampler::distribution(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                           TokenDist& out) {
  out.clear();
  apply_penalties(logits, n_vocab, history);
  if (params_.temperature <= 0.0f) {
    out.push_back({static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits), 1.0});
    return;
  }

  candidates_.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i)
    candidates_[static_cast<size_t>(i)] = {logits[i] / params_.temperature, i};
  const auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = candidates_.size();
  // Candidates [0, sorted) are in order; the rest only once a cut needs them.
  // A full sort of a 32000-token vocabulary per token was ~10 % of a 16-stream
  // step; most draws and cuts end within the most likely few dozen.
  size_t sorted = n;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = sorted = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                      candidates_.end(), by_logit);
  } else if (n > kSortedHead) {
    sorted = kSortedHead;
    const auto head_end = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted);
    std::nth_element(candidates_.begin(), head_end, candidates_.end(), by_logit);
    std::sort(candidates_.begin(), head_end, by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }

  // Probabilities of the kept candidates (the first is the max).
  const float max_logit = candidates_[0].logit;
  out.resize(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    out[i].id = candidates_[i].id;
    total += out[i].p = std::exp(static_cast<double>(candidates_[i].logit - max_logit));
  }
  for (TokenProb& t : out) t.p /= total;
  // Puts the unsorted tail in order, with the same probabilities.
  const auto sort_rest = [&] {
    std::sort(candidates_.begin() + static_cast<std::ptrdiff_t>(sorted),
              candidates_.begin() + static_cast<std::ptrdiff_t>(n), by_logit);
    for (size_t i = sorted; i < n; ++i)
      out[i] = {candidates_[i].id, std::exp(static_cast<double>(candidates_[i].logit - max_logit)) / total};
    sorted = n;
  };

  size_t keep = n;
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      if (i == sorted) sort_rest();
      cum += out[i].p;
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    const double floor = out[0].p * params_.min_p;
    size_t i = 1;
    for (; i < keep; ++i) {
      if (i == sorted) sort_rest();
      if (out[i].p < floor) break;
    }
    keep = i;
  }
  out.resize(keep);
  double mass = 0.0;
  for (const TokenProb& t : out) mass += t.p;
  for (TokenProb& t : out) t.p /= mass;
}

int32_t Sampler::draw(const TokenDist& dist) {
  if (dist.size() == 1) return dist[0].id;  // greedy draws nothing from the RNG
  double r = uniform();
  for (const TokenProb& t : dist) {
    r -= t.p;
    if (r < 0.0) return t.id;
  }
  return dist.back().id;
}

double prob_of(const TokenDist& dist, int32_t id) {
  for (const TokenProb& t : dist)
    if (t.id == id) return t.p;
  return 0.0;
}

}  // namespace duet
