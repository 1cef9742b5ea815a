// The progress bar's line (fraction, rate, time left), and that commands
// print no bar when stderr is not a terminal.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/progress.h"
#include "test_util.h"

namespace duet::cli {
namespace {

TEST(Progress, LineShowsFractionRateAndTimeLeft) {
  const std::string line = format_progress("quantize", 30, 120, 10, "MiB");
  EXPECT_EQ(line.rfind("quantize [######                  ]  25%", 0), 0u) << line;
  EXPECT_NE(line.find("3.0 MiB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("0:30 left"), std::string::npos) << line;  // 90 MiB at 3 MiB/s
}

TEST(Progress, DoneHasNoTimeLeftAndStartHasNoRate) {
  EXPECT_EQ(format_progress("x", 5, 5, 2, "runs").find("left"), std::string::npos);
  EXPECT_EQ(format_progress("x", 0, 5, 0, "runs").find("/s"), std::string::npos);
  EXPECT_NE(format_progress("x", 61 * 2, 61 * 3, 61 * 2, "s").find("1:01 left"), std::string::npos);
}

TEST(Progress, NoBarWhenStderrIsNotATerminal) {
  testing::TempDir dir;
  const std::string text = dir.file("story.txt");
  std::ofstream(text) << "Once upon a time there was a little girl who lived in a village near the forest. "
                         "She liked to play with her friends and her dog every day after school.";
  const auto r = testing::run_duet("perplexity -t 1 -m " + testing::shared_path("models/stories260K/stories260K.gguf") +
                                   " -f " + text + " --ctx 16 --stride 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("perplexity ["), std::string::npos) << r.output;
}

}  // namespace
}  // namespace duet::cli
