// The HTTP/1.1 transport: one I/O thread (standalone Asio) accepts and reads
// every connection asynchronously, so a client that trickles its request or
// never finishes it costs a socket and a buffer, not a thread; deadlines and
// limits (HttpLimits) close such clients. Only a complete request reaches a
// worker thread, which runs the handler and writes its response through the
// I/O thread, blocking on each write (a stream's back-pressure).
#pragma once

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>

#include "core/error.h"
#include "server/http_limits.h"
#include "server/http_message.h"

namespace duet::server {

class HttpConnection;

// A listening socket handed from one server to the next (the stand-in that
// answers while the model loads, to the real one): clients that connect in
// between wait in its backlog instead of being refused.
struct Listener {
  asio::ip::tcp protocol = asio::ip::tcp::v4();
  int fd = -1;
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // Builds the response for a request the transport refused (400, 413, ...).
  using ErrorBody = std::function<void(int status, const std::string& message, HttpResponse&)>;

  HttpServer(HttpLimits limits, int32_t workers, Handler handler, ErrorBody error_body);
  ~HttpServer();

  // Binds and listens; returns the port (the chosen one for port 0).
  Result<int> bind(const std::string& host, int port);
  // Any thread, while run() runs: stops accepting and gives up the
  // listening socket, still listening, to the caller.
  Listener release_listener();
  // Accepts on a socket another server released; returns its port.
  Result<int> adopt(Listener listener);
  // Runs the I/O thread on the caller until stop(), or until drain() has
  // seen every response end.
  void run();
  // Any thread: closes every connection now and ends run().
  void stop();
  // Any thread: closes idle connections, keeps no connection alive, and
  // ends run() once the responses in progress have ended (until then new
  // connections are still read, for the handler to refuse).
  void drain();
  bool draining() const { return draining_.load(); }

 private:
  friend class HttpConnection;
  void accept();
  void on_accepted(asio::ip::tcp::socket socket);
  // I/O thread: bookkeeping as connections come and go and handlers run.
  void forget(HttpConnection* c);
  void handler_started() { ++active_handlers_; }
  void handler_ended();
  void maybe_finish();

  const HttpLimits limits_;
  Handler handler_;
  ErrorBody error_body_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  asio::thread_pool workers_;

  // I/O thread only.
  std::unordered_map<HttpConnection*, std::shared_ptr<HttpConnection>> connections_;
  std::map<std::string, int32_t> per_address_;
  int32_t counted_ = 0;  // connections within the limits (refused ones linger uncounted)
  int32_t active_handlers_ = 0;
  bool stopping_ = false;

  std::atomic<bool> draining_{false};
  std::once_flag joined_;
};

}  // namespace duet::server
