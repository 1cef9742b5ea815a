// HTTP/1.1 as clients speak it to the transport: a chunked request body,
// Expect: 100-continue (curl's way with larger bodies), keep-alive reuse,
// an HTTP/1.0 stream delimited by the close, pipelining behind a stream,
// and a client that leaves before its response wrote anything.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "server/http_server.h"
#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

TEST(HttpProtocol, AChunkedRequestBodyIsServed) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string body = completion_body("Once upon a time", 4).dump();
  const size_t half = body.size() / 2;
  RawSocket sock(s.port());
  char size1[24], size2[24];
  std::snprintf(size1, sizeof size1, "%zx", half);
  std::snprintf(size2, sizeof size2, "%zx", body.size() - half);
  ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                            "Connection: close\r\n\r\n" + std::string(size1) + "\r\n" + body.substr(0, half) +
                            "\r\n" + size2 + "\r\n" + body.substr(half) + "\r\n0\r\n\r\n"));
  const std::string reply = sock.read_all();
  EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
  EXPECT_NE(reply.find("\"text_completion\""), std::string::npos) << reply;
}

TEST(HttpProtocol, ExpectContinueGetsTheInterimResponse) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string body = completion_body("Once upon a time", 4).dump();
  RawSocket sock(s.port());
  ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(status_line(sock.read_until("\r\n\r\n")), "HTTP/1.1 100 Continue");
  ASSERT_TRUE(sock.send_all(body));
  EXPECT_EQ(status_line(sock.read_all()), "HTTP/1.1 200 OK");
}

TEST(HttpProtocol, KeepAliveServesRequestsInTurnOnOneConnection) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  RawSocket sock(s.port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(sock.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")) << i;
    const std::string reply = sock.read_until("{\"status\":\"ok\"}");
    EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << i;
    EXPECT_EQ(reply.find("Connection: close"), std::string::npos);
  }
}

TEST(HttpProtocol, AnHttp10StreamEndsWithTheConnection) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = completion_body("Once upon a time", 8);
  body["stream"] = true;
  const std::string b = body.dump();
  RawSocket sock(s.port());
  ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.0\r\nContent-Length: " + std::to_string(b.size()) +
                            "\r\n\r\n" + b));
  bool closed = false;
  const std::string reply = sock.read_all(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK");
  EXPECT_EQ(reply.find("Transfer-Encoding"), std::string::npos) << reply;
  // Unchunked: the events follow the head as they are.
  EXPECT_NE(reply.find("\r\n\r\ndata: {"), std::string::npos) << reply;
  EXPECT_NE(reply.find("data: [DONE]\n\n"), std::string::npos);
}

TEST(HttpProtocol, ARequestPipelinedBehindAStreamIsServedAfterIt) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = completion_body("Once upon a time", 16);
  body["stream"] = true;
  RawSocket sock(s.port());
  ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", body.dump()) + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string reply = sock.read_until("{\"status\":\"ok\"}");
  const size_t done = reply.find("data: [DONE]");
  ASSERT_NE(done, std::string::npos) << reply;
  EXPECT_NE(reply.find("HTTP/1.1 200 OK", done), std::string::npos) << reply;
  EXPECT_NE(reply.find("{\"status\":\"ok\"}", done), std::string::npos);
}

// A response that has sent only its head (a request queued, or prefilling
// a long prompt) learns at once that its client left: the transport reads
// while it handles, and end of input ends the response.
TEST(HttpProtocol, AClientGoneBeforeAnyBodyEndsTheResponse) {
  std::promise<bool> ended;
  std::atomic<int> provider_calls{0};
  server::HttpServer http(
      server::HttpLimits{}, 2,
      [&](const server::HttpRequest&, server::HttpResponse& res) {
        res.set_chunked_content_provider(
            "text/event-stream",
            [&](server::DataSink&) {  // never writes: the first token is far away
              ++provider_calls;
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
              return true;
            },
            [&](bool done) { ended.set_value(done); });
      },
      [](int status, const std::string& message, server::HttpResponse& res) {
        res.status = status;
        res.set_content(message, "text/plain");
      });
  auto port = http.bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  std::thread io([&] { http.run(); });
  {
    RawSocket sock(*port);
    ASSERT_TRUE(sock.send_all(raw_post("/v1/completions", "{}")));
    ASSERT_NE(sock.read_until("\r\n\r\n").find("200 OK"), std::string::npos);
  }  // gone, with nothing of the body written
  std::future<bool> f = ended.get_future();
  const bool in_time = f.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  http.stop();
  io.join();
  ASSERT_TRUE(in_time) << "the response went on after its client left (" << provider_calls << " provider calls)";
  EXPECT_FALSE(f.get());
}

}  // namespace
}  // namespace duet::testing
