// The chat page at / and the per-answer "timings" it shows: the page is
// served without the API key and kept to its origin; every response carries
// timings beside usage. (The page itself runs in a browser in
// tests/reference/test_chat_page.py.)
#include <gtest/gtest.h>

#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

TEST(ChatPage, IsServedWithoutTheKeyAndKeptToItsOrigin) {
  HarnessOptions o;
  o.server.api_key = "sesame";
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  auto c = s.client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type").rfind("text/html", 0), 0u);
  const std::string csp = page->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_LT(page->body.size(), 100u * 1024);
  // It knows to ask for the key, and names no other host to fetch from.
  EXPECT_NE(page->body.find(R"(<body data-api-key="required">)"), std::string::npos);
  EXPECT_EQ(page->body.find("http://"), std::string::npos);
  EXPECT_EQ(page->body.find("https://"), std::string::npos);
  // The API behind it still wants the key.
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
}

TEST(ChatPage, WithoutAKeyThePageDoesNotAskForOne) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto page = s.client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body.find(R"(data-api-key="required")"), std::string::npos);
  auto post = s.client().Post("/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
}

void expect_timings(const json& usage, const json& t) {
  ASSERT_TRUE(t.is_object()) << t.dump();
  EXPECT_EQ(t["prompt_n"], usage["prompt_tokens"]);
  EXPECT_EQ(t["predicted_n"], usage["completion_tokens"]);
  EXPECT_GT(t["ttft_ms"].get<double>(), 0.0);
  EXPECT_GT(t["itl_ms"].get<double>(), 0.0);
  EXPECT_GT(t["predicted_per_second"].get<double>(), 0.0);
  const std::string verdict = t["verdict"];
  EXPECT_TRUE(verdict == "slow to start" || verdict == "slow to stream") << verdict;
  EXPECT_EQ(t["bound"], verdict == "slow to start" ? "prefill" : "decode");
}

TEST(ChatPage, ResponsesCarryTimingsBesideUsage) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})},
               {"max_tokens", 12}, {"temperature", 0}};
  auto c = s.client();
  auto whole = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(whole);
  const json w = json::parse(whole->body);
  expect_timings(w["usage"], w["timings"]);

  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(streamed);
  const auto events = sse_events(streamed->body);
  ASSERT_GE(events.size(), 3u);
  const json usage = json::parse(events[events.size() - 2]);
  expect_timings(usage["usage"], usage["timings"]);
  // The token chunks stay as OpenAI's: no timings there.
  EXPECT_FALSE(json::parse(events[1]).contains("timings"));
}

}  // namespace
}  // namespace duet::testing
