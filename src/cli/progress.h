// A progress bar for long work on a terminal: done / total, the rate and
// the time left, redrawn in place on stderr at most ten times a second.
// When stderr is not a terminal (a log, a pipe, CI) it prints nothing.
#pragma once

#include <chrono>
#include <string>

#include "core/progress_fn.h"

namespace duet::cli {

// One line of the bar, without the leading carriage return: "label
// [#####     ]  45%  12.3 MiB/s  0:05 left". `unit` names what done and total
// count ("MiB", "windows"); elapsed is in seconds.
std::string format_progress(const std::string& label, double done, double total, double elapsed_s,
                            const std::string& unit);

class ProgressBar {
 public:
  ProgressBar(std::string label, double total, std::string unit);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(double done);
  // Draws the last state and ends the line (once; the destructor calls it).
  void finish();
  bool shown() const { return tty_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_, unit_;
  double total_, done_ = 0;
  bool tty_, finished_ = false;
  Clock::time_point start_ = Clock::now(), last_draw_{};
  void draw();
};

// A ProgressFn that draws a bar the first time it is called (the total is
// known then), counting `scale` units per reported one (1.0 / (1 << 20) to
// show bytes as MiB); the bar ends when the last copy of the function goes.
ProgressFn progress_bar_fn(std::string label, std::string unit, double scale = 1);

}  // namespace duet::cli
