// The roofline picture of `duet bench --roofline --svg`: this machine's
// measured ceilings (DRAM read bandwidth rising into the fp32 FMA and the
// int8-dot peaks) on log-log axes of arithmetic intensity and achieved
// rate, and each measured phase as a point under them.
#pragma once

#include <string>
#include <vector>

#include "cli/svg_chart.h"
#include "kernels/roofline.h"

namespace duet::cli {

struct RooflinePoint {
  std::string name;       // e.g. "tg128 Q4_K"
  double intensity = 0;   // FLOPs per byte moved from memory
  double gflop_s = 0;     // achieved
};

Chart roofline_chart(const std::string& title, const Roofline& ceilings, const std::vector<RooflinePoint>& points);

}  // namespace duet::cli
