// The mean and sample standard deviation of a benchmark's repetitions.
#pragma once

#include <cmath>
#include <vector>

namespace duet::cli {

struct Spread {
  double mean = 0, stdev = 0;
};

inline Spread spread(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stdev += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(s.stdev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

}  // namespace duet::cli
