// Overload: max_tokens and prompt length capped by the server's flags (400s
// that say so), and a request past its deadline ended with an error, streamed
// (a final error event, then [DONE]) or whole (504). The full queue's 429 is
// in api_test.cc.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

TEST(Overload, MaxTokensAndPromptLengthAreCapped) {
  HarnessOptions o;
  o.server.max_tokens_limit = 8;
  o.server.max_prompt_tokens = 24;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  auto c = s.client();

  auto over = c.Post("/v1/completions", completion_body("Once", 9).dump(), "application/json");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 400);
  json e = json::parse(over->body)["error"];
  EXPECT_EQ(e["param"], "max_tokens");
  EXPECT_NE(e["message"].get<std::string>().find("at most 8"), std::string::npos) << e.dump();

  auto at = c.Post("/v1/completions", completion_body("Once", 8).dump(), "application/json");
  ASSERT_TRUE(at);
  EXPECT_EQ(at->status, 200) << at->body;

  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += " cat";
  auto too_long = c.Post("/v1/completions", completion_body(long_prompt, 4).dump(), "application/json");
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400);
  e = json::parse(too_long->body)["error"];
  EXPECT_EQ(e["code"], "prompt_too_long") << e.dump();
  EXPECT_NE(e["message"].get<std::string>().find("at most 24"), std::string::npos) << e.dump();

  // Without max_tokens, chat runs to the cap, not to the end of the context.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"ignore_eos", true}, {"temperature", 0}};
  auto r = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 8);
}

// Requests that would run far longer than the deadline (a context far past
// the model's, one engine thread, a queue of one).
HarnessOptions slow_server() {
  HarnessOptions o;
  o.engine.n_threads = 1;
  o.engine.ctx = 4096;
  o.engine.scheduler.max_seqs = 1;
  o.server.request_timeout_ms = 300;
  return o;
}

json endless(bool stream) {
  return {{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", stream}};
}

TEST(Overload, AStreamPastItsDeadlineEndsWithAnErrorEvent) {
  TestServer s(slow_server());
  ASSERT_TRUE(s.ok());
  RawSocket sock(s.port(), 20);
  ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", endless(true).dump())));
  const std::string reply = sock.read_until("data: [DONE]");
  const size_t err = reply.find("data: {\"error\"");
  ASSERT_NE(err, std::string::npos) << reply.substr(0, 300);
  EXPECT_NE(reply.find("request_timeout", err), std::string::npos);
  EXPECT_NE(reply.find("data: [DONE]", err), std::string::npos);
  EXPECT_EQ(reply.find("finish_reason\":\"length"), std::string::npos);
  // The request is ended in the engine too, its blocks freed.
  const std::string m = wait_for_metrics(s, [](const std::string& t) {
    return metric_value(t, "duet_requests_running") == 0 && metric_value(t, "duet_kv_blocks_used") == 0;
  });
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"cancelled\"}"), 1) << m;
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_used"), 0);
}

TEST(Overload, AWholeRequestPastItsDeadlineIs504) {
  HarnessOptions o = slow_server();
  o.server.whole_response_wait_ms = 60000;  // the deadline comes first
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  auto r = c.Post("/v1/completions", endless(false).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body.substr(0, 300);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "request_timeout");
}

}  // namespace
}  // namespace duet::testing
