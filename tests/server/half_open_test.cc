// A legitimate request while 1 000 connections are held open half-sent:
// heads trickled a byte at a time, heads sent in part and left, and bodies
// that never reach their Content-Length. The event loop holds them all
// without a thread each, so the real request is served at once. Its
// latency is printed, not asserted (no wall-clock bounds in tests).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server_harness.h"

namespace duet::testing {
namespace {

// Client and server share this process: two descriptors per connection.
bool raise_fd_limit(rlim_t want) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return false;
  if (r.rlim_cur >= want) return true;
  r.rlim_cur = std::min(want, r.rlim_max);
  return setrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur >= want;
}

TEST(HalfOpen, ARealRequestIsServedWhileAThousandConnectionsHang) {
  constexpr int kHalfOpen = 1000;
  ASSERT_TRUE(raise_fd_limit(2 * kHalfOpen + 256)) << "cannot raise RLIMIT_NOFILE";
  TestServer s;  // the default limits: 256 connections per client address
  ASSERT_TRUE(s.ok());

  // Spread over 8 client addresses (127.0.0.10-17), 125 each: within the
  // per-address cap, so the server must hold every one of them.
  std::vector<std::unique_ptr<RawSocket>> held;
  std::vector<RawSocket*> trickling;
  const std::string body_head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: 1000\r\n\r\n{\"prompt\": \"";
  for (int i = 0; i < kHalfOpen; ++i) {
    const std::string from = "127.0.0." + std::to_string(10 + i % 8);
    auto sock = std::make_unique<RawSocket>(s.port(), 10, from.c_str());
    ASSERT_TRUE(sock->ok()) << i;
    switch (i % 3) {
      case 0: ASSERT_TRUE(sock->send_all("POST /v1/completions HTTP/1.1\r\nHo")); trickling.push_back(sock.get()); break;
      case 1: ASSERT_TRUE(sock->send_all("GET /health HTTP/1.1\r\nHost: x\r\nX-Partial: yes")); break;
      case 2: ASSERT_TRUE(sock->send_all(body_head)); trickling.push_back(sock.get()); break;
    }
    held.push_back(std::move(sock));
  }
  // A third of them keep sending, one byte each every 100 ms (header bytes
  // or body bytes, never finishing either).
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop.load()) {
      for (RawSocket* t : trickling) t->send_all("a");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  auto c = s.client();
  const auto start = std::chrono::steady_clock::now();
  auto r = c.Post("/v1/completions", completion_body("Once upon a time", 8).dump(), "application/json");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  trickle.join();
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(nlohmann::json::parse(r->body)["choices"][0]["text"].get<std::string>().empty());
  std::printf("[ half-open ] a completion with %d half-sent connections held took %.1f ms\n", kHalfOpen, ms);

  // The connections were really held all along: none was closed or answered.
  int still_open = 0;
  for (auto& h : held) {
    bool closed = false;
    if (h->poll(&closed).empty() && !closed) ++still_open;
  }
  EXPECT_EQ(still_open, kHalfOpen);
}

}  // namespace
}  // namespace duet::testing
