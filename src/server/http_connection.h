// One client connection of the HttpServer. On the I/O thread it reads and
// parses requests under the head and body deadlines; a complete request goes
// to a worker thread, which runs the handler and writes the response through
// the I/O thread; then the connection reads the next request (keep-alive and
// pipelining) or closes. Refused requests get their status and a lingering
// close, so the client reads the reply instead of a reset.
#pragma once

#include <asio.hpp>

#include <array>
#include <atomic>
#include <memory>
#include <string>

#include "server/http_parser.h"

namespace duet::server {

class HttpServer;

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(HttpServer& server, asio::ip::tcp::socket socket, std::string address, bool counted);

  // I/O thread.
  void start();
  void refuse(int status, const std::string& message);  // answer, then close
  void close();
  // drain(): a connection not serving a request closes now; one serving a
  // request closes after its response.
  void close_unless_handling();
  const std::string& address() const { return address_; }
  bool counted() const { return counted_; }

 private:
  enum class Phase { kReading, kHandling, kClosing, kClosed };

  void read_more();
  void on_read_while_handling(const asio::error_code& ec, size_t n);
  void advance();
  void arm_deadline(int32_t ms);
  void on_deadline();
  void dispatch();
  void after_response(bool keep_alive);
  void linger_close();

  // Worker thread.
  void serve(const HttpRequest& req);
  bool stream(HttpResponse& res, bool chunked);
  bool write_blocking(std::string data);

  HttpServer& server_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer deadline_;  // head, body or linger deadline
  asio::steady_timer write_deadline_;
  const std::string address_;
  const bool counted_;  // in the per-address count
  RequestParser parser_;
  std::string in_;  // read, not yet parsed (pipelined requests wait here)
  std::array<char, 8192> buf_;
  Phase phase_ = Phase::kReading;
  bool in_body_ = false;        // the body deadline is armed
  bool read_pending_ = false;   // an async read is outstanding (at most one)
  std::atomic<bool> gone_{false};  // closed: a worker's provider should stop
};

}  // namespace duet::server
