// The transport's limits against clients that break them: an oversized
// head (431) or body (413), a head or body sent too slowly (408 and closed),
// too many connections from one address (429) or in all (503), and malformed
// or pipelined garbage (400) — the server answers each and goes on serving.
#include <gtest/gtest.h>

#include <thread>

#include "server_harness.h"

namespace duet::testing {
namespace {

TEST(HttpLimits, AnOversizedHeadIs431) {
  HarnessOptions o;
  o.server.http.max_header_bytes = 1024;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  RawSocket sock(s.port());
  ASSERT_TRUE(sock.send_all("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n"));
  const std::string reply = sock.read_all();
  EXPECT_EQ(status_line(reply), "HTTP/1.1 431 Request Header Fields Too Large") << reply;
  EXPECT_NE(reply.find("header_too_large"), std::string::npos) << reply;
  // Just under the limit is served.
  RawSocket fits(s.port());
  ASSERT_TRUE(fits.send_all("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(900, 'a') + "\r\n\r\n"));
  EXPECT_EQ(status_line(fits.read_until("\r\n")), "HTTP/1.1 200 OK");
}

TEST(HttpLimits, AnOversizedBodyIs413WhetherDeclaredOrChunked) {
  HarnessOptions o;
  o.server.http.max_body_bytes = 4096;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  {
    // Refused on its Content-Length alone, before the body is read.
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4097\r\n\r\n"));
    const std::string reply = sock.read_all();
    EXPECT_EQ(status_line(reply), "HTTP/1.1 413 Content Too Large") << reply;
    EXPECT_NE(reply.find("payload_too_large"), std::string::npos);
  }
  {
    RawSocket sock(s.port());
    std::string wire = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) wire += "400\r\n" + std::string(1024, 'a') + "\r\n";
    sock.send_all(wire);  // the server may stop reading after the fourth chunk
    EXPECT_EQ(status_line(sock.read_all()), "HTTP/1.1 413 Content Too Large");
  }
  EXPECT_TRUE(healthy(s));
}

TEST(HttpLimits, AHeadTrickledPastTheTimeoutIsClosed) {
  HarnessOptions o;
  o.server.http.header_timeout_ms = 500;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  RawSocket sock(s.port());
  // One byte every 50 ms keeps the connection busy but never finishes the
  // head: only the total deadline can end it. The client gives up after 10x.
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(200, 'a');
  std::string reply;
  bool closed = false;
  for (size_t i = 0; i < head.size() && !closed; ++i) {
    if (!sock.send_all(head.substr(i, 1))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reply += sock.poll(&closed);
  }
  if (!closed) reply += sock.read_all(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(status_line(reply), "HTTP/1.1 408 Request Timeout") << reply;
  EXPECT_TRUE(healthy(s));
}

TEST(HttpLimits, ABodyNotSentInTimeIs408AndClosed) {
  HarnessOptions o;
  o.server.http.body_timeout_ms = 300;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  RawSocket sock(s.port(), /*recv_timeout_s=*/10);
  ASSERT_TRUE(sock.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\""));
  bool closed = false;
  const std::string reply = sock.read_all(&closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(status_line(reply), "HTTP/1.1 408 Request Timeout") << reply;
  EXPECT_NE(reply.find("body was not sent in time"), std::string::npos) << reply;
}

TEST(HttpLimits, ConnectionsPerClientAddressAreCapped) {
  HarnessOptions o;
  o.server.http.max_conns_per_address = 4;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  std::vector<std::unique_ptr<RawSocket>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawSocket>(s.port(), 10, "127.0.0.3"));
  // Each held connection proves it is accepted (and counted) by being served.
  for (auto& h : held) {
    ASSERT_TRUE(h->send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_EQ(status_line(h->read_until("\r\n")), "HTTP/1.1 200 OK");
  }
  {
    RawSocket over(s.port(), 10, "127.0.0.3");
    bool closed = false;
    const std::string reply = over.read_all(&closed);
    EXPECT_EQ(status_line(reply), "HTTP/1.1 429 Too Many Requests") << reply;
    EXPECT_NE(reply.find("Retry-After: 1"), std::string::npos);
    EXPECT_TRUE(closed);
  }
  // Another address is not affected.
  RawSocket other(s.port(), 10, "127.0.0.4");
  ASSERT_TRUE(other.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(status_line(other.read_until("\r\n")), "HTTP/1.1 200 OK");
  // A closed connection frees its place.
  held.pop_back();
  std::string line;
  for (int tries = 0; tries < 100 && line != "HTTP/1.1 200 OK"; ++tries) {
    RawSocket again(s.port(), 10, "127.0.0.3");
    again.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    line = status_line(again.read_until("\r\n"));
    if (line != "HTTP/1.1 200 OK") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(line, "HTTP/1.1 200 OK");
}

TEST(HttpLimits, ConnectionsInAllAreCapped) {
  HarnessOptions o;
  o.server.http.max_conns = 4;
  TestServer s(o);
  ASSERT_TRUE(s.ok());
  // Four clients at four addresses, each well within its own share.
  std::vector<std::unique_ptr<RawSocket>> held;
  for (int i = 0; i < 4; ++i) {
    const std::string from = "127.0.0." + std::to_string(20 + i);
    held.push_back(std::make_unique<RawSocket>(s.port(), 10, from.c_str()));
    ASSERT_TRUE(held.back()->send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_EQ(status_line(held.back()->read_until("\r\n")), "HTTP/1.1 200 OK");
  }
  {
    // A fifth address is refused all the same: the server is full.
    RawSocket over(s.port(), 10, "127.0.0.30");
    bool closed = false;
    const std::string reply = over.read_all(&closed);
    EXPECT_EQ(status_line(reply), "HTTP/1.1 503 Service Unavailable") << reply;
    EXPECT_NE(reply.find("Retry-After: 1"), std::string::npos) << reply;
    EXPECT_NE(reply.find("too_many_connections"), std::string::npos) << reply;
    EXPECT_TRUE(closed);
  }
  // A closed connection frees its place (and a refused one never took one).
  held.pop_back();
  std::string line;
  for (int tries = 0; tries < 100 && line != "HTTP/1.1 200 OK"; ++tries) {
    RawSocket again(s.port(), 10, "127.0.0.30");
    again.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    line = status_line(again.read_until("\r\n"));
    if (line != "HTTP/1.1 200 OK") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(line, "HTTP/1.1 200 OK");
}

TEST(HttpLimits, MalformedRequestsAre400AndTheServerStaysUp) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string bad[] = {
      "GET /health HTTP/1.1 extra\r\n\r\n",
      "GET\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost x\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nnothex\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
      "GET /health HTTP/1.1\nHost: x\n\n",  // bare LFs
  };
  for (const std::string& wire : bad) {
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.send_all(wire));
    bool closed = false;
    const std::string reply = sock.read_all(&closed);
    EXPECT_EQ(status_line(reply), "HTTP/1.1 400 Bad Request") << wire;
    EXPECT_NE(reply.find("\"error\""), std::string::npos) << reply;
    EXPECT_TRUE(closed) << wire;
  }
  {
    // A TLS ClientHello on the plain port (no line end in it): a 400 from
    // its first byte, not a 408 once the head's timeout has passed (the
    // socket gives up at 5 s, half of that timeout).
    RawSocket sock(s.port(), 5);
    ASSERT_TRUE(sock.send_all(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)));
    bool closed = false;
    const std::string reply = sock.read_all(&closed);
    EXPECT_EQ(status_line(reply), "HTTP/1.1 400 Bad Request") << reply;
    EXPECT_NE(reply.find("not an HTTP request"), std::string::npos) << reply;
    EXPECT_TRUE(closed);
  }
  {
    // A good request pipelined with garbage: the first is answered, then
    // the garbage gets its 400 and the close.
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n\x16\x03\x01 not http at all\r\n\r\n"));
    bool closed = false;
    const std::string reply = sock.read_all(&closed);
    EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
    EXPECT_NE(reply.find("HTTP/1.1 400 Bad Request"), std::string::npos) << reply;
    EXPECT_TRUE(closed);
  }
  {
    // Two good pipelined requests get two answers in order.
    RawSocket sock(s.port());
    ASSERT_TRUE(sock.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n"
                              "Connection: close\r\n\r\n"));
    const std::string reply = sock.read_all();
    const size_t second = reply.find("HTTP/1.1 200 OK", 1);
    EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK", 0), 0u) << reply;
    ASSERT_NE(second, std::string::npos) << reply;
    EXPECT_NE(reply.find("stories260K", second), std::string::npos);
  }
  EXPECT_TRUE(healthy(s));
}

}  // namespace
}  // namespace duet::testing
