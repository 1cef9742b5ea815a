// Each answer's "timings": the figures from the engine's per-request times,
// and the verdict on which phase held it up against the measured ceilings.
#include "server/request_stats.h"

#include <gtest/gtest.h>

namespace duet::server {
namespace {

// 100 prompt tokens, first token at `ttft`, then 10 more `itl` apart.
RequestTimings timings(double ttft, double itl) {
  RequestTimings t;
  t.n_prompt = 100;
  t.first_token = ttft;
  for (int i = 0; i <= 10; ++i) t.token_times.push_back(ttft + i * itl);
  t.n_generated = 11;
  return t;
}

TEST(RequestStats, FiguresComeFromTheTokenTimes) {
  const nlohmann::json j = request_stats_json(timings(0.2, 0.05), RooflineBasis{});
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 200.0);
  EXPECT_NEAR(j["itl_ms"].get<double>(), 50.0, 1e-9);
  EXPECT_NEAR(j["predicted_per_second"].get<double>(), 20.0, 1e-9);
  EXPECT_NEAR(j["prompt_per_second"].get<double>(), 500.0, 1e-9);
  EXPECT_EQ(j["predicted_n"], 11);
  // No ceilings measured: no shares, and the verdict compares times.
  EXPECT_TRUE(j["prefill_pct_of_ceiling"].is_null());
  EXPECT_EQ(j["verdict"], "slow to stream");  // 0.5 s streaming against 0.2 s waiting
  EXPECT_EQ(j["bound"], "decode");
}

TEST(RequestStats, TheVerdictWeighsTimeLostAgainstTheCeilings) {
  // Prefill would take (100 tokens * 0.9 GFLOP + one 10 GFLOP row of
  // logits) / 1000 GFLOP/s = 0.1 s at the peak; decode 10 steps * 1 GB /
  // 20 GB/s = 0.5 s at the bandwidth.
  RooflineBasis roof;
  roof.compute_gop_s = 1000;
  roof.flops_per_token = 0.9e9;
  roof.head_flops = 10e9;
  roof.read_gb_s = 20;
  roof.weight_bytes = 1e9;
  // 0.3 s waiting (0.2 s lost) and 0.5 s streaming (none lost): slow to
  // start, though streaming took longer.
  const nlohmann::json j = request_stats_json(timings(0.3, 0.05), roof);
  EXPECT_EQ(j["verdict"], "slow to start");
  EXPECT_EQ(j["bound"], "prefill");
  EXPECT_NEAR(j["prefill_pct_of_ceiling"].get<double>(), 100.0 / 3, 1e-9);
  EXPECT_NEAR(j["decode_pct_of_ceiling"].get<double>(), 100.0, 1e-9);
  // Streaming at twice the ideal loses more: slow to stream.
  EXPECT_EQ(request_stats_json(timings(0.3, 0.1), roof)["verdict"], "slow to stream");
}

TEST(RequestStats, AnAnswerWithoutTokensHasNoRates) {
  RequestTimings t;
  t.n_prompt = 5;
  const nlohmann::json j = request_stats_json(t, RooflineBasis{});
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 0.0);
  EXPECT_TRUE(j["itl_ms"].is_null());
  EXPECT_TRUE(j["predicted_per_second"].is_null());
  EXPECT_TRUE(j["prompt_per_second"].is_null());
}

}  // namespace
}  // namespace duet::server
