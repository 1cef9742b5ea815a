// /metrics names the KV storage type and its bytes per token, and a server
// with a q8 cache in a fixed KV memory budget serves requests.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace duet {
namespace {

using namespace duet::testing;

TEST(KvMetrics, ExposeTypeAndBytesPerToken) {
  HarnessOptions o;
  o.engine.n_threads = 1;
  o.engine.kv_type = KvType::Q8;
  o.engine.kv_bytes = 64 * 1024;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  auto r = c.Post("/v1/completions", completion_body("Once upon a time", 20).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const std::string m = c.Get("/metrics")->body;
  // stories260K: 5 layers x K,V x 4 KV heads x (8 int8 + one fp16 scale).
  EXPECT_EQ(metric_value(m, "duet_kv_bytes_per_token"), 5 * 2 * 4 * 10) << m;
  EXPECT_EQ(metric_value(m, "duet_kv_cache_type{type=\"q8\"}"), 1) << m;
  // The pool is what fits in 64 KiB: 16 blocks of 16 tokens x 400 bytes = 102400 > 65536.
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_total"), 65536 / (16 * 400));
  EXPECT_LE(metric_value(m, "duet_kv_cache_bytes"), 65536);
}

}  // namespace
}  // namespace duet
