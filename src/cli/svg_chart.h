// Charts as SVG, written by duet itself for `duet bench --roofline --svg`
// and `duet bench-serve --svg`: panels side by side, each with linear or
// logarithmic axes, tick labels, a legend, and series drawn as lines or
// points. Every series is a <g class="series" data-name="...">; a line's
// <polyline> carries its data as data-points="x,y x,y ..." and every point
// marker data-x / data-y, so a test (or a script) can read the values back
// with an XML parser.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace duet::cli {

struct ChartAxis {
  std::string label;
  bool log = false;
};

struct ChartSeries {
  enum class Style { Line, Points, LineAndPoints };
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y) in data units
  Style style = Style::Line;
  bool dashed = false;
};

struct Chart {
  std::string title;
  ChartAxis x, y;
  std::vector<ChartSeries> series;
};

// One SVG document with the charts in a row. Points a log axis cannot show
// (zero or negative) and non-finite points are left out.
std::string render_svg(const std::vector<Chart>& panels);

// render_svg written to `path`.
Status write_svg(const std::string& path, const std::vector<Chart>& panels);

}  // namespace duet::cli
