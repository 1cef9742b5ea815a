// /metrics names the KV storage type and its bytes per token, and a server
// with a q8 cache in a fixed KV memory budget serves requests; over a
// mixture of experts it shows how evenly the router spreads the tokens.
#include <gtest/gtest.h>

#include "formats/llama_synth.h"
#include "server_harness.h"

namespace duet {
namespace {

using namespace duet::testing;

// /metrics of a server with options o after one 20-token completion.
std::string metrics_after_a_completion(const HarnessOptions& o) {
  TestServer s(o);
  EXPECT_TRUE(s.ok());
  auto c = s.client();
  auto r = c.Post("/v1/completions", completion_body("Once upon a time", 20).dump(), "application/json");
  EXPECT_TRUE(r);
  if (r) {
    EXPECT_EQ(r->status, 200) << r->body;
  }
  // The engine publishes the metrics of the step that ends a request before
  // the request's last event, so they count it once the response is here.
  const std::string m = c.Get("/metrics")->body;
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"stop\"}") +
                metric_value(m, "duet_requests_finished_total{reason=\"length\"}"),
            1)
      << m;
  return m;
}

TEST(KvMetrics, ExposeTypeAndBytesPerToken) {
  HarnessOptions o;
  o.engine.n_threads = 1;
  o.engine.kv_type = KvType::Q8;
  o.engine.kv_bytes = 64 * 1024;
  const std::string m = metrics_after_a_completion(o);
  // stories260K: 5 layers x K,V x 4 KV heads x (8 int8 + one fp16 scale).
  EXPECT_EQ(metric_value(m, "duet_kv_bytes_per_token"), 5 * 2 * 4 * 10) << m;
  EXPECT_EQ(metric_value(m, "duet_kv_cache_type{type=\"q8\"}"), 1) << m;
  // The pool is what fits in 64 KiB: 16 blocks of 16 tokens x 400 bytes = 102400 > 65536.
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_total"), 65536 / (16 * 400));
  EXPECT_LE(metric_value(m, "duet_kv_cache_bytes"), 65536);
  // Finished: its blocks are cached or free, none used, so the ratio is back to 0.
  EXPECT_EQ(metric_value(m, "duet_kv_usage_ratio"), 0) << m;
}

// The gauge a router balances by: used over total while a request holds
// blocks, back to 0 once it is gone.
TEST(KvMetrics, UsageRatioFollowsTheBlocksInUse) {
  HarnessOptions o;
  o.engine.n_threads = 1;
  o.engine.ctx = 2048;  // past the model's 128, so the request runs long
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  {
    RawSocket sock(s.port());
    nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}};
    ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", body.dump())));
    ASSERT_NE(sock.read_until("data: ").find("data: "), std::string::npos);
    // Published after the step that wrote the first piece.
    const std::string m =
        wait_for_metrics(s, [](const std::string& t) { return metric_value(t, "duet_kv_blocks_used") > 0; });
    const double used = metric_value(m, "duet_kv_blocks_used");
    EXPECT_GT(used, 0) << m;
    EXPECT_DOUBLE_EQ(metric_value(m, "duet_kv_usage_ratio"), used / metric_value(m, "duet_kv_blocks_total")) << m;
  }  // the client hangs up: the request is cancelled and its blocks released
  const std::string m = wait_for_metrics(s, [](const std::string& t) { return metric_value(t, "duet_kv_usage_ratio") == 0; });
  EXPECT_EQ(metric_value(m, "duet_kv_usage_ratio"), 0) << m;
}

TEST(MoeMetrics, ExpertLoadPerLayer) {
  TempDir dir;
  SynthOptions synth;
  synth.shape = {.arch = Arch::kQwen3Moe, .name = "moe", .n_vocab = 300, .dim = 64, .n_layers = 2, .n_heads = 4,
                 .n_kv_heads = 2, .head_dim = 16, .ffn_dim = 96, .ctx_len = 256, .n_experts = 8,
                 .n_experts_used = 2, .expert_ffn_dim = 32};
  synth.seed = 1;
  ASSERT_TRUE(synth_model(synth, dir.file("moe.gguf")).ok());
  HarnessOptions o;
  o.model_path = dir.file("moe.gguf");
  const std::string m = metrics_after_a_completion(o);
  for (const char* layer : {"0", "1"}) {
    const std::string l = std::string("{layer=\"") + layer + "\"";
    EXPECT_EQ(metric_value(m, "duet_moe_expert_load_count" + l + "}"), 8) << m;
    EXPECT_NEAR(metric_value(m, "duet_moe_expert_load_sum" + l + "}"), 8, 1e-9) << m;  // loads average 1
    EXPECT_EQ(metric_value(m, "duet_moe_expert_load_bucket" + l + ",le=\"+Inf\"}"), 8) << m;
  }
  EXPECT_GT(metric_value(m, "duet_moe_expert_load_max"), 1.0) << m;
}

// DeepSeek-V2's latent attention caches one row of kv_lora_rank + rope
// values per token and layer: /metrics reports those bytes, not full K/V's.
TEST(KvMetrics, LatentAttentionReportsTheLatentBytes) {
  TempDir dir;
  SynthOptions synth;
  synth.shape = {.arch = Arch::kDeepseek2, .name = "mla", .n_vocab = 300, .dim = 64, .n_layers = 2, .n_heads = 4,
                 .n_kv_heads = 4, .head_dim = 24, .ffn_dim = 96, .ctx_len = 256, .rope_dim = 8, .n_experts = 8,
                 .n_experts_used = 2, .expert_ffn_dim = 32, .shared_expert_ffn_dim = 32, .n_dense_leading = 1,
                 .kv_lora_rank = 32, .v_head_dim = 16};
  synth.seed = 1;
  ASSERT_TRUE(synth_model(synth, dir.file("mla.gguf")).ok());
  HarnessOptions o;
  o.model_path = dir.file("mla.gguf");
  o.engine.kv_type = KvType::F16;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  auto r = c.Post("/v1/completions", completion_body("Once upon a time", 20).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const std::string m = c.Get("/metrics")->body;
  // 2 layers x (32 + 8) halves; full K/V would be 2 x 4 heads x (24 + 16) halves, 4x more.
  EXPECT_EQ(metric_value(m, "duet_kv_bytes_per_token"), 2 * 40 * 2) << m;
}

}  // namespace
}  // namespace duet
