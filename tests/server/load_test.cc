// The server under hostile clients and under load: malformed requests,
// stalls, disconnects mid-stream, many concurrent requests, the prefix
// cache and preemption with a tiny KV pool.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

std::string complete(const TestServer& s, const json& body) {
  auto c = s.client();
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  if (!r || r->status != 200) return "<failed " + (r ? r->body : "no response: " + httplib::to_string(r.error())) + ">";
  return json::parse(r->body)["choices"][0]["text"];
}

TEST(ServerHostile, MalformedRequestsGetErrorsAndTheServerLives) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  {
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.send_all("\x01\x02 garbage \xff\r\n\r\n"));
    const std::string reply = sock.read_all();
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  }
  {
    RawSocket sock(s.port());
    const std::string big_header = "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(200000, 'a') + "\r\n\r\n";
    sock.send_all(big_header);  // the server may close before taking it all
    const std::string reply = sock.read_all();
    EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 4", 0) == 0) << reply.substr(0, 200);
    EXPECT_EQ(reply.find("200 OK"), std::string::npos);
  }
  {
    RawSocket sock(s.port());
    // A body shorter than its Content-Length, then the client hangs up.
    ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro"));
  }
  {
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", "[[[[[[[[[[[[[[[[[[[[")));
    EXPECT_EQ(sock.read_until("\r\n").rfind("HTTP/1.1 400", 0), 0u);
  }
  EXPECT_TRUE(healthy(s));
}

TEST(ServerHostile, AStalledPartialRequestIsDropped) {
  HarnessOptions o;
  o.server.http.header_timeout_ms = 1000;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  // The client waits ten times the server's header timeout: a close seen
  // before its own receive times out can only be the server dropping it.
  RawSocket sock(s.port(), /*recv_timeout_s=*/10);
  ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
  bool closed = false;
  sock.read_all(&closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(healthy(s));
}

TEST(ServerHostile, DisconnectMidStreamCancelsAndFreesEverything) {
  HarnessOptions o;
  o.engine.n_threads = 1;
  o.engine.ctx = 2048;  // past the model's 128, so the requests run long
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 3; ++i) {
    RawSocket sock(s.port());
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}};
    ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", body.dump())));
    ASSERT_NE(sock.read_until("data: ").find("data: "), std::string::npos);
  }  // each socket closes here, long before its 2000 tokens
  const std::string m = wait_for_metrics(s, [](const std::string& t) {
    return metric_value(t, "duet_requests_finished_total{reason=\"cancelled\"}") == 3 &&
           metric_value(t, "duet_requests_running") == 0 && metric_value(t, "duet_kv_blocks_used") == 0;
  });
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"cancelled\"}"), 3) << m;
  EXPECT_EQ(metric_value(m, "duet_requests_running"), 0);
  EXPECT_EQ(metric_value(m, "duet_requests_in_flight"), 0);
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_used"), 0);
}

// A non-streamed request still running after whole_response_wait_ms is
// answered with whitespace heartbeats; a client gone by then is noticed by
// a failed heartbeat and its request cancelled.
TEST(ServerHostile, DisconnectWhileAwaitingAWholeResponseCancels) {
  HarnessOptions o;
  o.engine.n_threads = 1;
  o.engine.ctx = 2048;
  o.server.whole_response_wait_ms = 50;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 2; ++i) {
    RawSocket sock(s.port());
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 2000}, {"ignore_eos", true}};
    ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", body.dump())));
    ASSERT_NE(sock.read_until("200 OK").find("200 OK"), std::string::npos);
  }  // closed while the 2000 tokens are being made
  const std::string m = wait_for_metrics(s, [](const std::string& t) {
    return metric_value(t, "duet_requests_finished_total{reason=\"cancelled\"}") == 2 &&
           metric_value(t, "duet_kv_blocks_used") == 0;
  });
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"cancelled\"}"), 2) << m;
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_used"), 0);
}

TEST(ServerHostile, AHeartbeatedWholeResponseIsTheSameJson) {
  HarnessOptions quick, slow;
  slow.server.whole_response_wait_ms = 0;
  TestServer a(quick), b(slow);
  ASSERT_TRUE(a.ok() && b.ok());
  const json body = completion_body("Once upon a time", 200);
  EXPECT_EQ(complete(b, body), complete(a, body));
}

TEST(ServerLoad, ABurstOfConnectionsIsAllServed) {
  // 64 clients connecting at the same moment, each asking for /health:
  // every one is answered. httplib listens with a backlog of 5; beyond it
  // the kernel dropped connections, and such clients saw a reset.
  TestServer s;
  ASSERT_TRUE(s.ok());
  constexpr int kClients = 64;
  std::atomic<int> ready{0}, answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&] {
      ++ready;
      while (ready.load() < kClients) std::this_thread::yield();
      RawSocket sock(s.port(), 5);
      if (sock.ok() && sock.send_all("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") &&
          sock.read_all().rfind("HTTP/1.1 200", 0) == 0)
        ++answered;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(answered.load(), kClients);
}

const std::vector<std::string> kPrompts = {
    "Once upon a time", "The cat", "Lily and Ben went", "One day, a big dog", "Tom had a red",
    "The sun was", "Sara liked to", "In the park", "A little bird", "The boy ran",
    "Mom said", "There was a tree", "Max the puppy", "The sky was blue and", "Anna found a", "It was a sunny"};

TEST(ServerLoad, SixteenConcurrentGreedyRequestsEachGetTheirSoloText) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::vector<std::string> solo;
  for (const auto& p : kPrompts) solo.push_back(complete(s, completion_body(p, 40)));
  std::vector<std::future<std::string>> together;
  for (const auto& p : kPrompts)
    together.push_back(std::async(std::launch::async, [&s, p] { return complete(s, completion_body(p, 40)); }));
  for (size_t i = 0; i < kPrompts.size(); ++i) EXPECT_EQ(together[i].get(), solo[i]) << kPrompts[i];
}

TEST(ServerLoad, SharedPrefixIsReusedAndGivesTheUncachedOutput) {
  const std::string prefix =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
      "with her friends. One day, she saw a big red ball near the tree and she wanted to play with it. ";
  const std::vector<std::string> tails = {"She ran", "Her mom said", "The ball"};
  auto outputs = [&](bool caching, std::string* metrics) {
    HarnessOptions o;
    o.engine.scheduler.prefix_caching = caching;
    TestServer s(o);
    std::vector<std::string> out;
    for (const auto& t : tails) out.push_back(complete(s, completion_body(prefix + t, 20)));
    if (metrics) *metrics = s.client().Get("/metrics")->body;
    return out;
  };
  std::string m;
  const auto cached = outputs(true, &m);
  const auto uncached = outputs(false, nullptr);
  EXPECT_EQ(cached, uncached);
  const double hits = metric_value(m, "duet_prefix_cache_hits_total");
  const int prefix_tokens = static_cast<int>(load_stories()->tokenizer().encode(prefix, true).size());
  // The second and third requests each find the prefix's full blocks.
  EXPECT_GE(hits, 2.0 * (prefix_tokens / kBlockTokens) * kBlockTokens) << m;
  EXPECT_GT(metric_value(m, "duet_prefix_cache_hit_rate"), 0.4);
}

TEST(ServerLoad, TinyKvPoolPreemptsAndEveryRequestStillCompletesCorrectly) {
  const std::vector<std::string> prompts(kPrompts.begin(), kPrompts.begin() + 8);
  std::vector<std::string> solo;
  {
    TestServer s;
    for (const auto& p : prompts) {
      json b = completion_body(p, 100);
      b["ignore_eos"] = true;
      solo.push_back(complete(s, b));
    }
  }
  HarnessOptions o;
  o.engine.n_kv_blocks = 16;  // 256 slots for 8 sequences of ~105 tokens
  o.engine.scheduler.max_seqs = 8;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  std::vector<std::future<std::string>> together;
  for (const auto& p : prompts)
    together.push_back(std::async(std::launch::async, [&s, p] {
      json b = completion_body(p, 100);
      b["ignore_eos"] = true;
      return complete(s, b);
    }));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].get(), solo[i]) << prompts[i];
  // Every answer is in, so the published metrics have every request's end.
  const std::string m = s.client().Get("/metrics")->body;
  EXPECT_GT(metric_value(m, "duet_preemptions_total"), 0) << m;
  EXPECT_EQ(metric_value(m, "duet_requests_finished_total{reason=\"length\"}"), 8);
  EXPECT_EQ(metric_value(m, "duet_kv_blocks_used"), 0);
}

}  // namespace
}  // namespace duet::testing
