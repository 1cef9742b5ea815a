#include "engine/metrics.h"

#include <algorithm>

namespace duet {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                       bounds_.begin());
  ++counts_[i];
  ++count_;
  sum_ += v;
}

EngineMetrics::EngineMetrics()
    : ttft({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void RateMeter::add(double now_s, int64_t n) {
  events_.emplace_back(now_s, n);
  total_ += n;
}

double RateMeter::rate(double now_s) {
  while (!events_.empty() && events_.front().first < now_s - window_) {
    total_ -= events_.front().second;
    events_.pop_front();
  }
  return static_cast<double>(total_) / window_;
}

double LayerExpertLoad::max() const { return load.empty() ? 0.0 : *std::max_element(load.begin(), load.end()); }

int32_t LayerExpertLoad::idle() const {
  return static_cast<int32_t>(std::count(load.begin(), load.end(), 0.0));
}

std::vector<LayerExpertLoad> expert_loads(const std::vector<uint64_t>& counts, int32_t n_experts) {
  std::vector<LayerExpertLoad> layers;
  if (n_experts <= 0) return layers;
  const auto ne = static_cast<size_t>(n_experts);
  for (size_t l = 0; l * ne < counts.size(); ++l) {
    LayerExpertLoad x;
    x.layer = static_cast<int32_t>(l);
    for (size_t e = 0; e < ne; ++e) x.tokens += counts[l * ne + e];
    if (x.tokens == 0) continue;
    const double mean = static_cast<double>(x.tokens) / n_experts;
    for (size_t e = 0; e < ne; ++e) x.load.push_back(static_cast<double>(counts[l * ne + e]) / mean);
    layers.push_back(std::move(x));
  }
  return layers;
}

}  // namespace duet
