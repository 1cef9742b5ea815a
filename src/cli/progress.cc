#include "cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>

namespace duet::cli {

std::string format_progress(const std::string& label, double done, double total, double elapsed_s,
                            const std::string& unit) {
  constexpr int kWidth = 24;
  const double frac = total > 0 ? std::min(1.0, std::max(0.0, done / total)) : 0.0;
  const int filled = static_cast<int>(kWidth * frac);
  char buf[256];
  std::string line = label + " [" + std::string(static_cast<size_t>(filled), '#') +
                     std::string(static_cast<size_t>(kWidth - filled), ' ') + "]";
  std::snprintf(buf, sizeof buf, " %3.0f%%", 100.0 * frac);
  line += buf;
  if (elapsed_s > 0 && done > 0) {
    const double rate = done / elapsed_s;
    std::snprintf(buf, sizeof buf, "  %.1f %s/s", rate, unit.c_str());
    line += buf;
    if (done < total) {
      const auto left = static_cast<long>(std::ceil((total - done) / rate));
      std::snprintf(buf, sizeof buf, "  %ld:%02ld left", left / 60, left % 60);
      line += buf;
    }
  }
  return line;
}

ProgressBar::ProgressBar(std::string label, double total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), tty_(isatty(fileno(stderr)) != 0) {}

void ProgressBar::update(double done) {
  done_ = done;
  if (!tty_ || Clock::now() - last_draw_ < std::chrono::milliseconds(100)) return;
  draw();
}

void ProgressBar::draw() {
  last_draw_ = Clock::now();
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  // Clear to the end of the line: a shorter redraw must not leave a tail.
  std::fprintf(stderr, "\r%s\x1b[K", format_progress(label_, done_, total_, elapsed, unit_).c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!tty_) return;
  draw();
  std::fputc('\n', stderr);
}

ProgressFn progress_bar_fn(std::string label, std::string unit, double scale) {
  auto bar = std::make_shared<std::unique_ptr<ProgressBar>>();
  return [bar, label = std::move(label), unit = std::move(unit), scale](uint64_t done, uint64_t total) {
    if (!*bar) *bar = std::make_unique<ProgressBar>(label, static_cast<double>(total) * scale, unit);
    (*bar)->update(static_cast<double>(done) * scale);
  };
}

}  // namespace duet::cli
