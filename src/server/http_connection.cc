#include "server/http_connection.h"

#include <future>

#include "server/http_server.h"

namespace duet::server {
namespace {

// How long a refused client gets to read its answer before the close.
constexpr int32_t kLingerMs = 2000;

bool wants_keep_alive(const HttpRequest& req) {
  const std::string& c = req.header("Connection");
  return req.minor_version >= 1 ? !iequals(c, "close") : iequals(c, "keep-alive");
}

// The sink a streaming provider writes to, in chunks (HTTP/1.1) or raw
// until the close (HTTP/1.0).
class ConnectionSink : public DataSink {
 public:
  ConnectionSink(std::function<bool(std::string)> write, bool chunked) : write_(std::move(write)), chunked_(chunked) {}
  bool write(const char* data, size_t n) override {
    if (n == 0) return true;
    return write_(chunked_ ? chunk(std::string_view(data, n)) : std::string(data, n));
  }
  void done() override { done_ = true; }
  bool is_done() const { return done_; }

 private:
  std::function<bool(std::string)> write_;
  bool chunked_;
  bool done_ = false;
};

}  // namespace

HttpConnection::HttpConnection(HttpServer& server, asio::ip::tcp::socket socket, std::string address, bool counted)
    : server_(server),
      socket_(std::move(socket)),
      deadline_(socket_.get_executor()),
      write_deadline_(socket_.get_executor()),
      address_(std::move(address)),
      counted_(counted),
      parser_(server.limits_) {}

void HttpConnection::start() {
  asio::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);  // SSE chunks go out as they come
  arm_deadline(server_.limits_.header_timeout_ms);
  read_more();
}

void HttpConnection::arm_deadline(int32_t ms) {
  deadline_.expires_after(std::chrono::milliseconds(ms));
  deadline_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (!ec) self->on_deadline();
  });
}

void HttpConnection::on_deadline() {
  if (phase_ == Phase::kClosing) return close();
  if (phase_ != Phase::kReading) return;
  // An idle keep-alive connection just closes; a request begun and not
  // finished in time is told why.
  if (!parser_.started()) return close();
  refuse(408, in_body_ ? "the request body was not sent in time" : "the request head was not sent in time");
}

// One read is pending at a time, in every phase (Asio allows no second read
// on a socket while one is out): while a request is being handled it
// watches for the client going away, so a request waiting in the queue or
// still prefilling is cancelled then, not at its first write; while closing
// it drains what the client still sends (linger_close).
void HttpConnection::read_more() {
  if (read_pending_) return;
  read_pending_ = true;
  socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
    self->read_pending_ = false;
    switch (self->phase_) {
      case Phase::kHandling:
        return self->on_read_while_handling(ec, n);
      case Phase::kReading:
        if (ec) return self->close();
        self->in_.append(self->buf_.data(), n);
        return self->advance();
      case Phase::kClosing:  // dropped until the client closes or the linger deadline
        return ec ? self->close() : self->read_more();
      case Phase::kClosed:
        return;
    }
  });
}

// End of input (or an error) while a response is in progress means the
// client is gone: HTTP clients do not half-close, and uvicorn (vLLM) and
// llama.cpp's server take it the same way. Bytes that arrive are a
// pipelined request, kept for after the response; past the head limit the
// watch stops and the kernel's buffer pushes back.
void HttpConnection::on_read_while_handling(const asio::error_code& ec, size_t n) {
  if (ec) return close();
  in_.append(buf_.data(), n);
  if (in_.size() < server_.limits_.max_header_bytes) read_more();
}

void HttpConnection::advance() {
  const RequestParser::State s = parser_.feed(in_);
  if (s == RequestParser::State::kError) return refuse(parser_.error_status(), parser_.error_message());
  if (s == RequestParser::State::kDone) return dispatch();
  if (s == RequestParser::State::kBody && !in_body_) {
    in_body_ = true;
    arm_deadline(server_.limits_.body_timeout_ms);
    if (parser_.expects_continue()) {
      auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      asio::async_write(socket_, asio::buffer(*interim), [interim](const asio::error_code&, size_t) {});
    }
  }
  read_more();
}

void HttpConnection::dispatch() {
  deadline_.cancel();
  phase_ = Phase::kHandling;
  parser_.request().remote_address = address_;
  server_.handler_started();
  asio::post(server_.workers_, [self = shared_from_this()] { self->serve(self->parser_.request()); });
  read_more();
}

void HttpConnection::serve(const HttpRequest& req) {
  HttpResponse res;
  try {
    server_.handler_(req, res);
  } catch (...) {
    res = {};
    server_.error_body_(500, "internal server error", res);
  }
  bool keep_alive = wants_keep_alive(req) && !server_.draining();
  if (!res.provider) {
    keep_alive = write_blocking(response_head(res, static_cast<long long>(res.body.size()), !keep_alive) + res.body) &&
                 keep_alive;
  } else {
    // HTTP/1.0 has no chunks: the stream's end is the connection's.
    const bool chunked = req.minor_version >= 1;
    keep_alive = stream(res, chunked) && keep_alive && chunked;
  }
  asio::post(socket_.get_executor(), [self = shared_from_this(), keep_alive] {
    self->after_response(keep_alive);
    self->server_.handler_ended();
  });
}

// Calls the provider until it finishes or the client is gone; true when the
// whole body was written.
bool HttpConnection::stream(HttpResponse& res, bool chunked) {
  ConnectionSink sink([this](std::string s) { return write_blocking(std::move(s)); }, chunked);
  bool ok = write_blocking(response_head(res, chunked ? kChunked : kUntilClose, !chunked));
  while (ok && !sink.is_done() && !gone_.load()) ok = res.provider(sink);
  const bool done = ok && sink.is_done() && (!chunked || write_blocking(chunk({})));
  if (res.on_end) res.on_end(done);
  return done;
}

// Hands `data` to the I/O thread and waits for it to be written; a client
// that takes none of it within the write timeout is closed.
bool HttpConnection::write_blocking(std::string data) {
  if (gone_.load()) return false;
  std::promise<bool> written;
  std::future<bool> result = written.get_future();
  asio::post(socket_.get_executor(), [this, self = shared_from_this(), &data, &written] {
    if (phase_ == Phase::kClosed) return written.set_value(false);
    write_deadline_.expires_after(std::chrono::milliseconds(server_.limits_.write_timeout_ms));
    write_deadline_.async_wait([self](const asio::error_code& ec) {
      if (!ec) self->close();
    });
    asio::async_write(socket_, asio::buffer(data), [this, self, &written](const asio::error_code& ec, size_t) {
      write_deadline_.cancel();
      written.set_value(!ec);
    });
  });
  return result.get();
}

void HttpConnection::after_response(bool keep_alive) {
  if (phase_ != Phase::kHandling) return;
  if (!keep_alive || server_.draining()) return linger_close();
  phase_ = Phase::kReading;
  in_body_ = false;
  parser_.reset();
  arm_deadline(server_.limits_.header_timeout_ms);
  advance();  // a pipelined request may be here already
}

void HttpConnection::refuse(int status, const std::string& message) {
  if (phase_ == Phase::kClosing || phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosing;
  arm_deadline(kLingerMs);  // for the write and the lingering read together
  HttpResponse res;
  server_.error_body_(status, message, res);
  auto out = std::make_shared<std::string>(response_head(res, static_cast<long long>(res.body.size()), true) + res.body);
  asio::async_write(socket_, asio::buffer(*out), [self = shared_from_this(), out](const asio::error_code& ec, size_t) {
    if (ec) return self->close();
    self->linger_close();
  });
}

// Shuts the sending side and reads (and drops) what the client still sends
// for a while: closing with unread input would reset the connection and
// could destroy the reply before the client read it.
void HttpConnection::linger_close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosing;
  asio::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec) return close();
  arm_deadline(kLingerMs);
  read_more();  // or the read already out (a response's watch) drains on
}

void HttpConnection::close_unless_handling() {
  if (phase_ == Phase::kReading) close();
}

void HttpConnection::close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  gone_ = true;
  asio::error_code ec;
  deadline_.cancel();
  write_deadline_.cancel();
  socket_.close(ec);
  server_.forget(this);
}

}  // namespace duet::server
