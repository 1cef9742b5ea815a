#include "cli/roofline_chart.h"

#include <algorithm>
#include <cstdio>

namespace duet::cli {
namespace {

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

Chart roofline_chart(const std::string& title, const Roofline& ceilings, const std::vector<RooflinePoint>& points) {
  const double bw = ceilings.read_gb_s;  // GB/s × FLOP/B = GFLOP/s
  double lo = 0.5, hi = 1;
  for (const RooflinePoint& p : points) {
    lo = std::min(lo, p.intensity);
    hi = std::max(hi, p.intensity);
  }
  const double ridge = bw > 0 ? std::max(ceilings.fma_gflop_s, ceilings.int8_gop_s) / bw : 1;
  lo /= 2;
  hi = std::max(hi, ridge) * 4;

  Chart c;
  c.title = title + ", DRAM read " + fixed(bw) + " GB/s";
  c.x = {"arithmetic intensity (FLOP per byte from memory)", true};
  c.y = {"GFLOP/s (int8: GOP/s)", true};
  // Each roof: the bandwidth slope up to its ridge point, flat after it.
  const auto roof = [&](const std::string& name, double peak, bool dashed) {
    ChartSeries s{name, {}, ChartSeries::Style::Line, dashed};
    if (bw <= 0 || peak <= 0) return s;
    const double knee = peak / bw;
    s.points = {{lo, bw * lo}};
    if (knee > lo && knee < hi) s.points.emplace_back(knee, peak);
    s.points.emplace_back(hi, std::min(peak, bw * hi));
    return s;
  };
  c.series.push_back(roof("fp32 FMA peak " + fixed(ceilings.fma_gflop_s) + " GFLOP/s", ceilings.fma_gflop_s, false));
  c.series.push_back(roof("int8 dot peak " + fixed(ceilings.int8_gop_s) + " GOP/s", ceilings.int8_gop_s, true));
  for (const RooflinePoint& p : points)
    c.series.push_back({p.name, {{p.intensity, p.gflop_s}}, ChartSeries::Style::Points, false});
  return c;
}

}  // namespace duet::cli
