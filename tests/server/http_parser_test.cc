// The HTTP/1.1 request parser on its own: framing by Content-Length and by
// chunks, requests split across reads and pipelined, and every refusal with
// its status (no server, no sockets).
#include <gtest/gtest.h>

#include "server/http_parser.h"

namespace duet::server {
namespace {

using State = RequestParser::State;

// Feeds `wire` in pieces of `step` bytes, as slow clients send it.
State feed_in_steps(RequestParser& p, const std::string& wire, size_t step, std::string& rest) {
  State s = State::kHead;
  for (size_t i = 0; i < wire.size() && s != State::kError && s != State::kDone; i += step) {
    rest += wire.substr(i, step);
    s = p.feed(rest);
  }
  return s;
}

TEST(HttpParser, AContentLengthRequestByteByByte) {
  HttpLimits limits;
  RequestParser p(limits);
  std::string rest;
  const std::string wire = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-A:  b c \r\n\r\nhello";
  EXPECT_EQ(feed_in_steps(p, wire, 1, rest), State::kDone);
  const HttpRequest& r = p.request();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.minor_version, 1);
  EXPECT_EQ(r.header("x-a"), "b c");
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(rest.empty());
}

TEST(HttpParser, ChunkedBodiesAreJoinedAndTrailersDropped) {
  HttpLimits limits;
  for (size_t step : {1, 3, 1000}) {
    RequestParser p(limits);
    std::string rest;
    const std::string wire =
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-T: 1\r\n\r\n";
    EXPECT_EQ(feed_in_steps(p, wire, step, rest), State::kDone) << step;
    EXPECT_EQ(p.request().body, "hello, world!!!");
  }
}

TEST(HttpParser, PipelinedRequestsStayForTheNext) {
  HttpLimits limits;
  RequestParser p(limits);
  std::string in = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\n\r\n";
  ASSERT_EQ(p.feed(in), State::kDone);
  EXPECT_EQ(p.request().path, "/a");
  p.reset();
  ASSERT_EQ(p.feed(in), State::kDone);
  EXPECT_EQ(p.request().path, "/b");
  EXPECT_EQ(p.request().minor_version, 0);
  EXPECT_TRUE(in.empty());
}

TEST(HttpParser, PartialInputWaits) {
  HttpLimits limits;
  RequestParser p(limits);
  std::string in = "GET / HTTP/1.1\r\nHost: a\r\n";
  EXPECT_EQ(p.feed(in), State::kHead);
  EXPECT_TRUE(p.started());
  in += "Content-Length: 3\r\n\r\nab";
  EXPECT_EQ(p.feed(in), State::kBody);
}

TEST(HttpParser, RefusalsCarryTheirStatus) {
  struct Case {
    std::string wire;
    int status;
  };
  const Case cases[] = {
      {"GARBAGE\r\n\r\n", 400},
      {"GET /  HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / FTP/1.0\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n", 413},
      {"GET / HTTP/1.1\r\nX: " + std::string(600, 'a') + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nX: " + std::string(600, 'a'), 431},
      // Bare LF line ends, anywhere a line ends.
      {"GET / HTTP/1.1\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n", 400},
  };
  HttpLimits limits;
  limits.max_header_bytes = 512;
  limits.max_body_bytes = 1000;
  for (const Case& c : cases) {
    RequestParser p(limits);
    std::string in = c.wire;
    EXPECT_EQ(p.feed(in), State::kError) << c.wire;
    EXPECT_EQ(p.error_status(), c.status) << c.wire;
    EXPECT_FALSE(p.error_message().empty());
  }
}

// What cannot begin a request line is refused at its first bytes, with no
// line end seen: a TLS ClientHello sent to the plain port would otherwise
// wait out the head's timeout for a 408.
TEST(HttpParser, BytesThatCannotStartARequestAreRefusedAtOnce) {
  HttpLimits limits;
  const std::string client_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  for (const std::string& wire : {client_hello, std::string("\x00", 1), std::string(" GET"), std::string("G\x80"),
                                  std::string(40, 'A')}) {
    RequestParser p(limits);
    std::string in = wire;
    EXPECT_EQ(p.feed(in), State::kError) << wire;
    EXPECT_EQ(p.error_status(), 400);
  }
  for (const std::string& wire : {std::string("GET"), std::string("POST /v1"), std::string("\r\nGE")}) {
    RequestParser p(limits);
    std::string in = wire;
    EXPECT_EQ(p.feed(in), State::kHead) << wire;
  }
}

TEST(HttpParser, ExpectContinueIsSeenWhileTheBodyIsAwaited) {
  HttpLimits limits;
  RequestParser p(limits);
  std::string in = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  EXPECT_EQ(p.feed(in), State::kBody);
  EXPECT_TRUE(p.expects_continue());
  in = "ok";
  EXPECT_EQ(p.feed(in), State::kDone);
  EXPECT_FALSE(p.expects_continue());
}

}  // namespace
}  // namespace duet::server
