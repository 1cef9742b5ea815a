// What one large /v1/embeddings request may cost the others, over sockets:
// it runs in passes between generation steps, so a completion sent while it
// runs is answered before it (both right), and the per-request caps on
// inputs and tokens are 400s after which the server serves on as before.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <thread>

#include "server/embeddings_api.h"
#include "server_harness.h"

namespace duet::testing {
namespace embeddings_bounds {  // named: the unity build joins test files

using nlohmann::json;

// duet_embedding_tokens_total: embedding tokens run so far, pass by pass.
double embedding_tokens(const TestServer& s) {
  auto r = s.client().Get("/metrics");
  return r && r->status == 200 ? metric_value(r->body, "duet_embedding_tokens_total") : -1;
}

// 16 greedy tokens: the same text whatever runs beside them.
std::string complete(const TestServer& s) {
  auto r = s.client().Post("/v1/completions", completion_body("Once upon a time", 16).dump(), "application/json");
  if (!r || r->status != 200) {
    ADD_FAILURE() << (r ? r->body : "no answer");
    return {};
  }
  return json::parse(r->body)["choices"][0]["text"];
}

httplib::Result embed(const TestServer& s, const json& input) {
  return s.client().Post("/v1/embeddings", json{{"input", input}}.dump(), "application/json");
}

std::vector<float> vector_of(const json& reply, size_t i) {
  return reply["data"][i]["embedding"].get<std::vector<float>>();
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// The case, smaller: 2048 inputs (the most a request may hold) of
// 4 to 16 tokens, ~20k tokens in some 640 passes of 32, where the
// completion needs 17 steps.
TEST(EmbeddingsBounds, ACompletionSentDuringALargeRequestIsAnsweredBeforeIt) {
  HarnessOptions o;
  o.engine.scheduler.max_batch_tokens = 32;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const std::string alone = complete(s);
  json inputs = json::array();
  int64_t total = 0;
  for (int32_t i = 0; i < 2048; ++i) {
    std::vector<int32_t> ids;
    for (int32_t p = 0; p < 4 + i % 13; ++p) ids.push_back(1 + (i * 11 + p * 29) % 511);
    total += static_cast<int64_t>(ids.size());
    inputs.push_back(ids);
  }
  auto big = std::async(std::launch::async, [&] { return embed(s, inputs); });
  // Once it runs, a completion: answered while the embeddings still run.
  double ran = 0;
  for (int i = 0; i < 6000 && ran <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ran = embedding_tokens(s);
  }
  ASSERT_GT(ran, 0);
  ASSERT_LT(ran, total) << "no pass was seen before the embeddings ended: they ran whole, or too fast to test";
  EXPECT_EQ(complete(s), alone);
  EXPECT_LT(embedding_tokens(s), total) << "the completion waited for the embeddings";

  httplib::Result r = big.get();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 300);
  const json reply = json::parse(r->body);
  ASSERT_EQ(reply["data"].size(), inputs.size());
  EXPECT_EQ(reply["usage"]["prompt_tokens"], total);
  for (size_t i = 0; i < inputs.size(); ++i) {
    double norm = 0;
    for (float x : vector_of(reply, i)) norm += static_cast<double>(x) * x;
    ASSERT_NEAR(norm, 1.0, 1e-5) << i;
  }
  // Inputs embedded alone give the same vectors (other batch shapes: the
  // same sums to rounding).
  for (size_t i : {size_t{0}, size_t{1000}, inputs.size() - 1}) {
    httplib::Result one = embed(s, inputs[i]);
    ASSERT_TRUE(one && one->status == 200);
    EXPECT_LT(max_diff(vector_of(json::parse(one->body), 0), vector_of(reply, i)), 1e-5) << i;
  }
  EXPECT_EQ(complete(s), alone);
}

TEST(EmbeddingsBounds, InputsAndTokensPastTheCapsAre400sAndTheServerServesOn) {
  HarnessOptions o;
  o.server.embeddings.max_inputs = 4;
  o.server.embeddings.max_tokens = 50;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  const auto refused = [](const httplib::Result& r, const std::string& says, const std::string& code) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_NE(e["message"].get<std::string>().find(says), std::string::npos) << e.dump();
    EXPECT_EQ(e["code"], code) << e.dump();
    EXPECT_EQ(e["param"], "input") << e.dump();
  };
  refused(embed(s, {"a", "b", "c", "d", "e"}), "has 5 inputs; this server accepts at most 4", "too_many_inputs");
  const std::vector<int32_t> twenty(20, 9);
  refused(embed(s, {twenty, twenty, twenty}), "more than 50 tokens; this server accepts at most 50",
          "too_many_tokens");
  refused(embed(s, std::vector<int32_t>(51, 9)), "more than 50 tokens", "too_many_tokens");
  std::string story;
  for (int i = 0; i < 20; ++i) story += "Once upon a time, there was a cat. ";
  refused(embed(s, story), "more than 50 tokens", "too_many_tokens");
  // At the caps: answered.
  const std::vector<int32_t> twelve(12, 9);
  httplib::Result fits = embed(s, {twelve, twelve, twelve, std::vector<int32_t>(14, 9)});
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
  EXPECT_EQ(json::parse(fits->body)["data"].size(), 4u);
  EXPECT_FALSE(complete(s).empty());
}

}  // namespace embeddings_bounds
}  // namespace duet::testing
