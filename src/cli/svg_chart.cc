#include "cli/svg_chart.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

namespace duet::cli {
namespace {

// Panel geometry in SVG user units: the plot area sits inside margins that
// hold the tick labels, the axis labels, the title and (right) the legend.
constexpr double kPanelW = 720, kPanelH = 400;
constexpr double kLeft = 72, kRight = 250, kTop = 40, kBottom = 56;
constexpr double kPlotW = kPanelW - kLeft - kRight, kPlotH = kPanelH - kTop - kBottom;

// Colour-blind-safe palette (Okabe and Ito's eight, black last).
const char* const kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                "#E69F00", "#56B4E9", "#F0E442", "#000000"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool shown(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// An axis's data range and ticks, and the map from data to [0, 1].
struct Scale {
  bool log = false;
  double lo = 0, hi = 1;  // in data units (log: positive)
  std::vector<double> ticks;

  double unit(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
};

// Ticks at 1, 2 and 5 times powers of ten, about five across the range.
Scale linear_scale(double lo, double hi) {
  if (lo > 0 && lo < hi * 0.5) lo = 0;  // start at zero unless the data sit far from it
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::abs(lo));
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  Scale s;
  s.lo = std::floor(lo / step) * step;
  s.hi = std::ceil(hi / step) * step;
  for (double t = s.lo; t <= s.hi + step * 1e-9; t += step) s.ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return s;
}

// Whole decades; with fewer than two decades the 2s and 5s are ticked too.
Scale log_scale(double lo, double hi) {
  Scale s;
  s.log = true;
  s.lo = std::pow(10, std::floor(std::log10(lo)));
  s.hi = std::pow(10, std::ceil(std::log10(hi)));
  if (s.hi <= s.lo) s.hi = s.lo * 10;
  const bool fine = s.hi / s.lo <= 100;
  for (double d = s.lo; d <= s.hi * 1.0001; d *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if ((m == 1.0 || fine) && d * m <= s.hi * 1.0001) s.ticks.push_back(d * m);
  return s;
}

Scale fit_scale(const Chart& c, bool x_axis) {
  const bool log = x_axis ? c.x.log : c.y.log;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ChartSeries& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (!shown(x, c.x.log) || !shown(y, c.y.log)) continue;
      const double v = x_axis ? x : y;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  if (!std::isfinite(lo)) return log ? log_scale(1, 10) : linear_scale(0, 1);
  return log ? log_scale(lo, hi) : linear_scale(lo, hi);
}

void axes(std::string& out, const Chart& c, const Scale& xs, const Scale& ys) {
  out += "<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n";
  out += "<rect x=\"" + px(kLeft) + "\" y=\"" + px(kTop) + "\" width=\"" + px(kPlotW) + "\" height=\"" +
         px(kPlotH) + "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (double t : xs.ticks) {
    const double x = kLeft + xs.unit(t) * kPlotW;
    out += "<line class=\"grid\" x1=\"" + px(x) + "\" y1=\"" + px(kTop) + "\" x2=\"" + px(x) + "\" y2=\"" +
           px(kTop + kPlotH) + "\" stroke=\"#e4e4e4\"/>\n";
    out += "<text class=\"tick\" x=\"" + px(x) + "\" y=\"" + px(kTop + kPlotH + 15) + "\" text-anchor=\"middle\">" +
           num(t) + "</text>\n";
  }
  for (double t : ys.ticks) {
    const double y = kTop + (1 - ys.unit(t)) * kPlotH;
    out += "<line class=\"grid\" x1=\"" + px(kLeft) + "\" y1=\"" + px(y) + "\" x2=\"" + px(kLeft + kPlotW) +
           "\" y2=\"" + px(y) + "\" stroke=\"#e4e4e4\"/>\n";
    out += "<text class=\"tick\" x=\"" + px(kLeft - 6) + "\" y=\"" + px(y + 4) + "\" text-anchor=\"end\">" + num(t) +
           "</text>\n";
  }
  out += "<text class=\"x-label\" x=\"" + px(kLeft + kPlotW / 2) + "\" y=\"" + px(kPanelH - 14) +
         "\" text-anchor=\"middle\" font-size=\"13\">" + escape(c.x.label) + "</text>\n";
  out += "<text class=\"y-label\" transform=\"translate(16 " + px(kTop + kPlotH / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">" + escape(c.y.label) + "</text>\n";
  out += "<text class=\"title\" x=\"" + px(kLeft + kPlotW / 2) + "\" y=\"" + px(kTop - 14) +
         "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" + escape(c.title) + "</text>\n";
  out += "</g>\n";
}

void series(std::string& out, const Chart& c, const Scale& xs, const Scale& ys, size_t index) {
  const ChartSeries& s = c.series[index];
  const std::string colour = kColours[index % std::size(kColours)];
  out += "<g class=\"series\" data-name=\"" + escape(s.name) + "\" stroke=\"" + colour + "\" fill=\"" + colour +
         "\">\n";
  std::string line, data, dots;
  for (const auto& [x, y] : s.points) {
    if (!shown(x, c.x.log) || !shown(y, c.y.log)) continue;
    const double sx = kLeft + xs.unit(x) * kPlotW, sy = kTop + (1 - ys.unit(y)) * kPlotH;
    if (!line.empty()) {
      line += ' ';
      data += ' ';
    }
    line += px(sx) + "," + px(sy);
    data += num(x) + "," + num(y);
    dots += "<circle cx=\"" + px(sx) + "\" cy=\"" + px(sy) + "\" r=\"4\" data-x=\"" + num(x) + "\" data-y=\"" + num(y) +
            "\"><title>" + escape(s.name) + ": " + num(x) + ", " + num(y) + "</title></circle>\n";
  }
  if (s.style != ChartSeries::Style::Points && !line.empty())
    out += "<polyline fill=\"none\" stroke-width=\"2\"" +
           std::string(s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + line + "\" data-points=\"" + data +
           "\"/>\n";
  if (s.style != ChartSeries::Style::Line) out += dots;
  out += "</g>\n";
}

void legend(std::string& out, const Chart& c) {
  out += "<g class=\"legend\" font-size=\"11\">\n";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const double y = kTop + 10 + 18 * static_cast<double>(i);
    const std::string colour = kColours[i % std::size(kColours)];
    const double x = kLeft + kPlotW + 14;
    if (c.series[i].style == ChartSeries::Style::Points)
      out += "<circle cx=\"" + px(x + 9) + "\" cy=\"" + px(y) + "\" r=\"4\" fill=\"" + colour + "\"/>\n";
    else
      out += "<line x1=\"" + px(x) + "\" y1=\"" + px(y) + "\" x2=\"" + px(x + 18) + "\" y2=\"" + px(y) +
             "\" stroke-width=\"2\" stroke=\"" + colour + "\"" +
             (c.series[i].dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    out += "<text x=\"" + px(x + 24) + "\" y=\"" + px(y + 4) + "\">" + escape(c.series[i].name) + "</text>\n";
  }
  out += "</g>\n";
}

}  // namespace

std::string render_svg(const std::vector<Chart>& panels) {
  const double width = kPanelW * static_cast<double>(std::max<size_t>(panels.size(), 1));
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) + "\" height=\"" + px(kPanelH) +
         "\" viewBox=\"0 0 " + px(width) + " " + px(kPanelH) + "\" font-family=\"sans-serif\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const Chart& c = panels[p];
    const Scale xs = fit_scale(c, true), ys = fit_scale(c, false);
    out += "<g class=\"chart\" data-title=\"" + escape(c.title) + "\" transform=\"translate(" +
           px(kPanelW * static_cast<double>(p)) + " 0)\">\n";
    axes(out, c, xs, ys);
    for (size_t i = 0; i < c.series.size(); ++i) series(out, c, xs, ys, i);
    legend(out, c);
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

Status write_svg(const std::string& path, const std::vector<Chart>& panels) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return err("cannot write '", path, "': ", std::strerror(errno));
  f << render_svg(panels);
  f.close();
  if (!f) return err("cannot write '", path, "': ", std::strerror(errno));
  return {};
}

}  // namespace duet::cli
