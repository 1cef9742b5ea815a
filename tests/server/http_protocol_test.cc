// HTTP/1.1 as clients speak it to the transport: a chunked request body,
// Expect: 100-continue (curl's way with larger bodies), keep-alive reuse,
// and an HTTP/1.0 stream delimited by the close.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace duet::testing {
namespace {

using nlohmann::json;

std::string status_line(const std::string& reply) { return reply.substr(0, reply.find("\r\n")); }

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

}  // namespace
}  // namespace duet::testing
