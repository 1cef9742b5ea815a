// An incremental HTTP/1.1 request parser (RFC 9112): the request line,
// header fields and a body by Content-Length or chunked transfer coding,
// within HttpLimits. It refuses what it cannot frame unambiguously (both
// Content-Length and Transfer-Encoding, differing lengths, folded headers,
// lines ended by a bare LF), so no request can be read two ways, and bytes
// that cannot begin a request line at their first byte.
#pragma once

#include <cstddef>
#include <string>

#include "server/http_limits.h"
#include "server/http_message.h"

namespace duet::server {

class RequestParser {
 public:
  enum class State { kHead, kBody, kDone, kError };

  explicit RequestParser(const HttpLimits& limits) : limits_(limits) {}

  // Consumes what it can of `in` (the bytes used are erased; bytes past the
  // end of the request stay for the next one) and says where it is.
  State feed(std::string& in);
  State state() const { return state_; }
  // Whether any byte of this request has been seen.
  bool started() const { return started_; }
  // The client sent `Expect: 100-continue` and a body is still to come.
  bool expects_continue() const;

  HttpRequest& request() { return req_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // Ready for the next request on the connection.
  void reset();

 private:
  State fail(int status, std::string message);
  State parse_head(std::string& in);
  State parse_fields(std::string_view head);
  State frame_body();
  State parse_body(std::string& in);
  State parse_chunked(std::string& in);

  const HttpLimits& limits_;
  State state_ = State::kHead;
  bool started_ = false;
  size_t scanned_ = 0;  // head bytes already searched for its end
  HttpRequest req_;
  bool chunked_ = false;
  size_t remaining_ = 0;  // Content-Length bytes, or the current chunk's
  enum class Chunk { kSize, kData, kDataEnd, kTrailer } chunk_ = Chunk::kSize;
  size_t trailer_bytes_ = 0;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace duet::server
