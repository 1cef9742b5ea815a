// The HTTP/1.1 messages the server's handlers see: a complete request (read
// and checked by the connection before any handler runs) and the response a
// handler fills in, either whole or as a stream of chunks written by a
// content provider on the handler's worker thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace duet::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // the target up to '?'
  int minor_version = 1;  // HTTP/1.minor
  HttpHeaders headers;    // names as sent; look up with header()
  std::string body;       // de-chunked
  std::string remote_address;

  // The first header of that name (case-insensitive); empty when absent.
  const std::string& header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

// Where a streaming response's provider writes. write() blocks until the
// bytes are handed to the kernel; false means the client is gone (or too
// slow to read), and the provider should stop.
class DataSink {
 public:
  virtual ~DataSink() = default;
  virtual bool write(const char* data, size_t n) = 0;
  // The response is complete.
  virtual void done() = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  std::string content_type;
  // When set, the body is streamed (chunked): the provider is called until it
  // returns false or calls sink.done(); then on_end(true when done() ran).
  std::function<bool(DataSink&)> provider;
  std::function<void(bool)> on_end;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_chunked_content_provider(std::string type, std::function<bool(DataSink&)> p,
                                    std::function<void(bool)> end) {
    content_type = std::move(type);
    provider = std::move(p);
    on_end = std::move(end);
  }
};

// "OK", "Not Found", ... for the statuses duet sends.
const char* status_reason(int status);

// How a response's body is delimited.
constexpr long long kChunked = -1;     // chunked transfer coding (HTTP/1.1)
constexpr long long kUntilClose = -2;  // by closing the connection (HTTP/1.0 streams)

// The status line and headers; `length`: the body's size, or kChunked or
// kUntilClose. close: Connection: close.
std::string response_head(const HttpResponse& res, long long length, bool close);

// One chunk of a chunked body; an empty `data` gives the last chunk.
std::string chunk(std::string_view data);

bool iequals(std::string_view a, std::string_view b);

}  // namespace duet::server
