// duet bench-serve against its in-process server on stories260K: every
// request completes and the JSON report's figures are consistent with the mix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace duet {
namespace {

using testing::duet_binary;
using testing::run_command;

TEST(BenchServeCli, ReportsAConsistentRun) {
  const std::string model = testing::shared_path("models/stories260K/stories260K.gguf");
  const auto r = run_command(duet_binary() + " bench-serve -m " + model +
                             " -t 1 -c 4 -n 8 --prompt-words 2:6 --output-tokens 8:16 --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t end = r.output.find_last_not_of('\n');
  const size_t start = r.output.rfind('\n', end);
  const auto j = nlohmann::json::parse(r.output.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j["requests_ok"], 8);
  const int64_t tokens = j["output_tokens"];
  EXPECT_GE(tokens, 8 * 8);
  EXPECT_LE(tokens, 8 * 16);
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["output_tok_s"].get<double>(), 0);
  EXPECT_LE(j["ttft_ms"]["p50"].get<double>(), j["ttft_ms"]["p99"].get<double>());
  // Sampled from /metrics every 50 ms: a run this short may see no sample.
  const double kv = j["kv_utilization"];
  if (j["kv_samples"].get<int64_t>() > 0) {
    EXPECT_GT(kv, 0);
    EXPECT_LE(kv, 1);
  } else {
    EXPECT_EQ(kv, 0);
  }
}

}  // namespace
}  // namespace duet
