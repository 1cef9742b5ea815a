#include "server/http_server.h"

#include <future>

#include "server/http_connection.h"

namespace duet::server {

HttpServer::HttpServer(HttpLimits limits, int32_t workers, Handler handler, ErrorBody error_body)
    : limits_(limits),
      handler_(std::move(handler)),
      error_body_(std::move(error_body)),
      guard_(asio::make_work_guard(io_)),
      acceptor_(io_),
      accept_retry_(io_),
      workers_(static_cast<size_t>(std::max(1, workers))) {}

HttpServer::~HttpServer() {
  // run() has returned (or never ran): no worker waits on the I/O thread.
  workers_.join();
}

Result<int> HttpServer::bind(const std::string& host, int port) {
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  auto found = resolver.resolve(host, std::to_string(port), asio::ip::resolver_base::passive, ec);
  if (ec || found.empty()) return err("cannot resolve ", host, ": ", ec.message());
  const asio::ip::tcp::endpoint at = found.begin()->endpoint();
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  // A full backlog drops connections before accept: a burst of clients
  // starting at once must all get in.
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return err("cannot listen on ", host, ":", port, " (", ec.message(), ")");
  accept();
  return static_cast<int>(acceptor_.local_endpoint().port());
}

Listener HttpServer::release_listener() {
  std::promise<Listener> released;
  asio::post(io_, [this, &released] {
    asio::error_code ec;
    Listener l{acceptor_.local_endpoint(ec).protocol(), -1};
    if (!ec) l.fd = acceptor_.release(ec);  // the pending accept ends, aborted
    released.set_value(ec ? Listener{} : l);
  });
  return released.get_future().get();
}

Result<int> HttpServer::adopt(Listener listener) {
  if (listener.fd < 0) return err("no listening socket to take over");
  asio::error_code ec;
  acceptor_.assign(listener.protocol, listener.fd, ec);
  if (ec) return err("cannot take over the listening socket (", ec.message(), ")");
  accept();
  return static_cast<int>(acceptor_.local_endpoint().port());
}

void HttpServer::run() { io_.run(); }

void HttpServer::accept() {
  acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (!ec) {
      on_accepted(std::move(socket));
      return accept();
    }
    // Out of descriptors (or another passing failure): try again shortly
    // rather than spin; connections already open go on meanwhile.
    accept_retry_.expires_after(std::chrono::milliseconds(50));
    accept_retry_.async_wait([this](const asio::error_code& e) {
      if (!e) accept();
    });
  });
}

void HttpServer::on_accepted(asio::ip::tcp::socket socket) {
  asio::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  std::string address = remote.address().to_string();
  // The server's own bound first (its descriptors and memory, whoever the
  // clients are; 503), then the one address's share of it (429).
  const bool full = counted_ >= limits_.max_conns;
  int32_t& n = per_address_[address];
  const bool over = !full && n >= limits_.max_conns_per_address;
  if (!full && !over) {
    ++n;
    ++counted_;
  } else if (n == 0) {
    per_address_.erase(address);
  }
  auto c = std::make_shared<HttpConnection>(*this, std::move(socket), std::move(address), !full && !over);
  connections_.emplace(c.get(), c);
  if (full) return c->refuse(503, "the server has too many open connections; retry later");
  if (over) return c->refuse(429, "too many connections from this address");
  c->start();
}

void HttpServer::forget(HttpConnection* c) {
  auto it = connections_.find(c);
  if (it == connections_.end()) return;
  if (c->counted()) {
    --counted_;
    auto n = per_address_.find(c->address());
    if (n != per_address_.end() && --n->second <= 0) per_address_.erase(n);
  }
  connections_.erase(it);  // last: may destroy c
}

void HttpServer::handler_ended() {
  --active_handlers_;
  maybe_finish();
}

// Once stopping (or draining) and no handler is left, nothing can still
// need the I/O thread: close what is left and end run().
void HttpServer::maybe_finish() {
  if (!(stopping_ || draining_.load()) || active_handlers_ > 0) return;
  asio::error_code ec;
  acceptor_.close(ec);
  accept_retry_.cancel();
  std::vector<std::shared_ptr<HttpConnection>> open;
  for (auto& [p, c] : connections_) open.push_back(c);
  for (auto& c : open) c->close();
  guard_.reset();
  io_.stop();
}

void HttpServer::stop() {
  asio::post(io_, [this] {
    stopping_ = true;
    asio::error_code ec;
    acceptor_.close(ec);
    std::vector<std::shared_ptr<HttpConnection>> open;
    for (auto& [p, c] : connections_) open.push_back(c);
    for (auto& c : open) c->close();  // a worker's next write fails, and its handler ends
    maybe_finish();
  });
}

// The listener stays open until the last handler ends: a load balancer's
// health check during the grace gets its 503 instead of a refused
// connection (and new requests theirs, from the handler).
void HttpServer::drain() {
  draining_ = true;
  asio::post(io_, [this] {
    std::vector<std::shared_ptr<HttpConnection>> open;
    for (auto& [p, c] : connections_) open.push_back(c);
    for (auto& c : open) c->close_unless_handling();
    maybe_finish();
  });
}

}  // namespace duet::server
