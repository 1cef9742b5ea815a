#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"

namespace duet {

namespace {

// Likelier first; equal logits by id, so the order is total.
template <class C>
bool by_logit(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() {
  // 53 random bits: the same stream on every platform, unlike std distributions.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_bias(float* logits, int32_t n_vocab) const {
  const auto in_vocab = [&](const TokenBias& b) { return b.token >= 0 && b.token < n_vocab; };
  std::vector<TokenBias> forced;
  for (const TokenBias& b : params_.logit_bias)
    if (b.bias >= 100.0f && in_vocab(b) && logits[b.token] != -INFINITY) forced.push_back({b.token, logits[b.token]});
  if (!forced.empty()) {
    // Only the forced tokens stay possible, in their own proportions.
    std::fill(logits, logits + n_vocab, -INFINITY);
    for (const TokenBias& f : forced) logits[f.token] = f.bias;
    return;
  }
  for (const TokenBias& b : params_.logit_bias)
    if (in_vocab(b)) logits[b.token] = b.bias <= -100.0f ? -INFINITY : logits[b.token] + b.bias;
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

// The kSortedHead likeliest of scaled_, sorted, into head_. One pass keeps a buffer of at most 4 heads above a
// threshold that only rises (the head's last logit at each trim), so most of
// the vocabulary costs one compare; std::nth_element over all of it cost
// more than the rest of a draw.
void Sampler::select_head() {
  constexpr size_t kBuffer = 4 * kSortedHead;
  const auto head_end = [&] { return head_.begin() + static_cast<std::ptrdiff_t>(kSortedHead); };
  const auto trim = [&] {
    std::nth_element(head_.begin(), head_end() - 1, head_.end(), by_logit<Candidate>);
    head_.resize(kSortedHead);
  };
  head_.clear();
  float threshold = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < scaled_.size(); ++i) {
    if (!(scaled_[i] >= threshold)) continue;
    head_.push_back({scaled_[i], static_cast<int32_t>(i)});
    if (head_.size() == kBuffer) {
      trim();
      threshold = head_.back().logit;
    }
  }
  if (head_.size() > kSortedHead) trim();
  std::sort(head_.begin(), head_.end(), by_logit<Candidate>);
}

bool Sampler::in_tail(size_t id) const {
  const Candidate c{scaled_[id], static_cast<int32_t>(id)}, last = head_.back();
  // Not above the head's last and not it: NaN, which ranks nowhere, joins the tail too.
  return !by_logit(c, last) && c.id != last.id;
}

void Sampler::scale(const float* logits, int32_t n_vocab) {
  scaled_.resize(static_cast<size_t>(n_vocab));
  for (size_t i = 0; i < scaled_.size(); ++i) scaled_[i] = logits[i] / params_.temperature;
}

int32_t Sampler::sample(float* logits, int32_t n_vocab, std::span<const int32_t> history) {
  const bool uncut = params_.top_k <= 0 && params_.top_p >= 1.0f && params_.min_p <= 0.0f;
  if (params_.temperature <= 0.0f || !uncut || static_cast<size_t>(n_vocab) <= kSortedHead) {
    distribution(logits, n_vocab, history, dist_);
    return draw(dist_);
  }
  // No cut: draw() over distribution()'s list without building it (32000
  // entries per token). The same probabilities in the same order (the head,
  // then the rest by id), so the same token for the same random number.
  apply_bias(logits, n_vocab);
  apply_penalties(logits, n_vocab, history);
  scale(logits, n_vocab);
  select_head();
  weights_.resize(scaled_.size());
  const double total = exp_shifted(scaled_.data(), head_[0].logit, weights_.data(), n_vocab);
  double r = uniform();
  for (const Candidate& c : head_)
    if ((r -= weights_[static_cast<size_t>(c.id)] / total) < 0.0) return c.id;
  int32_t last = head_.back().id;
  for (size_t i = 0; i < scaled_.size(); ++i) {
    if (!in_tail(i)) continue;
    last = static_cast<int32_t>(i);
    if ((r -= weights_[i] / total) < 0.0) return last;
  }
  return last;
}

void Sampler::distribution(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                           TokenDist& out) {
  out.clear();
  apply_bias(logits, n_vocab);
  apply_penalties(logits, n_vocab, history);
  if (params_.temperature <= 0.0f) {
    out.push_back({static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits), 1.0});
    return;
  }

  const auto n_all = static_cast<size_t>(n_vocab);
  scale(logits, n_vocab);
  size_t n = n_all;
  // Candidates [0, sorted) are in order; the rest only once a cut needs them.
  // A full sort of a 32000-token vocabulary per token was ~10 % of a 16-stream
  // step; most draws and cuts end within the most likely few dozen.
  size_t sorted = n;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = sorted = static_cast<size_t>(params_.top_k);
    candidates_.resize(n_all);
    for (size_t i = 0; i < n_all; ++i) candidates_[i] = {scaled_[i], static_cast<int32_t>(i)};
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n),
                      candidates_.end(), by_logit<Candidate>);
  } else if (n > kSortedHead) {
    sorted = kSortedHead;
    select_head();
    candidates_.assign(head_.begin(), head_.end());
    for (size_t i = 0; i < n_all; ++i)
      if (in_tail(i)) candidates_.push_back({scaled_[i], static_cast<int32_t>(i)});
  } else {
    candidates_.resize(n_all);
    for (size_t i = 0; i < n_all; ++i) candidates_[i] = {scaled_[i], static_cast<int32_t>(i)};
    std::sort(candidates_.begin(), candidates_.end(), by_logit<Candidate>);
  }

  // Probabilities of the kept candidates (the first is the max).
  const float max_logit = candidates_[0].logit;
  out.resize(n);
  double total = 0.0;
  if (n == n_all) {
    weights_.resize(n_all);
    total = exp_shifted(scaled_.data(), max_logit, weights_.data(), static_cast<int64_t>(n_all));
    for (size_t i = 0; i < n; ++i) out[i] = {candidates_[i].id, weights_[static_cast<size_t>(candidates_[i].id)]};
  } else {
    for (size_t i = 0; i < n; ++i) {
      out[i].id = candidates_[i].id;
      total += out[i].p = std::exp(static_cast<double>(candidates_[i].logit - max_logit));
    }
  }
  for (TokenProb& t : out) t.p /= total;
  // Puts the unsorted tail in order, with the same probabilities.
  const auto sort_rest = [&] {
    std::sort(candidates_.begin() + static_cast<std::ptrdiff_t>(sorted),
              candidates_.begin() + static_cast<std::ptrdiff_t>(n), by_logit<Candidate>);
    // Only the head path leaves a tail, and it has every weight.
    for (size_t i = sorted; i < n; ++i)
      out[i] = {candidates_[i].id, weights_[static_cast<size_t>(candidates_[i].id)] / total};
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
  if (keep == n) return;  // no cut: already normalized
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
