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

}  // namespace duet
