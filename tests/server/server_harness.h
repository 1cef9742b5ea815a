// An in-process duet server on 127.0.0.1 and a free port, over stories260K,
// plus small HTTP helpers (httplib's client and raw sockets) for the tests.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_loop.h"
#include "server/openai_server.h"
#include "test_util.h"

namespace duet::testing {

inline std::unique_ptr<Model> load_model(const std::string& path) {
  auto m = Model::load(path);
  return m.ok() ? std::move(*m) : nullptr;
}

inline std::unique_ptr<Model> load_stories() { return load_model(shared_path("models/stories260K/stories260K.gguf")); }

struct HarnessOptions {
  EngineConfig engine;
  server::ServerConfig server;
  int32_t max_in_flight = 64;
  SpecConfig spec;  // speculative decoding, when enabled()
  std::string model_path;  // empty: stories260K
};

class TestServer {
 public:
  explicit TestServer(HarnessOptions o = {})
      : model_(o.model_path.empty() ? load_stories() : load_model(o.model_path)) {
    if (!model_) return;
    if (o.engine.n_threads == 0) o.engine.n_threads = 2;
    engine_ = std::make_unique<Engine>(*model_, o.engine);
    if (o.spec.enabled() && !engine_->enable_speculation(o.spec).ok()) return;
    loop_ = std::make_unique<EngineLoop>(*engine_, o.max_in_flight);
    o.server.port = 0;
    if (o.server.model_name.empty()) o.server.model_name = "stories260K";
    server_ = std::make_unique<server::OpenAiServer>(*model_, *loop_, o.server);
    auto p = server_->bind();
    if (!p.ok()) return;
    port_ = *p;
    thread_ = std::thread([this] { server_->listen(); });
  }
  ~TestServer() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
    loop_.reset();
  }
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  Model& model() { return *model_; }
  EngineLoop& loop() { return *loop_; }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<server::OpenAiServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// A connected TCP socket to 127.0.0.1:port (closed on destruction), with a
// receive timeout so a test never hangs. `from`: a local address to connect
// from (any of 127.0.0.0/8 works on Linux), as if another client.
class RawSocket {
 public:
  explicit RawSocket(int port, int recv_timeout_s = 10, const char* from = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{recv_timeout_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (from) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, from, &local.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) close();
    }
    if (fd_ < 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  }
  ~RawSocket() { close(); }
  bool ok() const { return fd_ >= 0; }
  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `marker` appears, the peer closes, or the timeout passes.
  std::string read_until(const std::string& marker) {
    std::string out;
    char buf[4096];
    while (out.find(marker) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Reads to the end; `closed` tells whether the peer closed (not a timeout).
  std::string read_all(bool* closed = nullptr) {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (closed) *closed = n == 0 || errno == ECONNRESET;
      return out;
    }
  }
  // What has arrived, without waiting: "" and `closed` false when nothing.
  std::string poll(bool* closed) {
    std::string out;
    char buf[4096];
    *closed = false;
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      *closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
      return out;
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// The data: payloads of an SSE body, in order.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// A POST request with a JSON body, as bytes for a raw socket.
inline std::string raw_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A value from Prometheus text: the first sample line starting with `name`
// (including any labels) followed by a space; -1 when absent.
inline double metric_value(const std::string& text, const std::string& name) {
  size_t pos = 0;
  while ((pos = text.find(name + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + name.size() + 1));
    pos += name.size();
  }
  return -1;
}

// Polls /metrics until `done` holds for its text or `seconds` pass.
template <class Pred>
std::string wait_for_metrics(const TestServer& s, Pred done, int seconds = 20) {
  std::string text;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    auto c = s.client();
    auto r = c.Get("/metrics");
    if (r && r->status == 200) {
      text = r->body;
      if (done(text)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return text;
}

// GET /health answers 200.
inline bool healthy(const TestServer& s) {
  auto c = s.client();
  auto r = c.Get("/health");
  return r && r->status == 200;
}

// The first line of a raw HTTP reply.
inline std::string status_line(const std::string& reply) { return reply.substr(0, reply.find("\r\n")); }

inline nlohmann::json completion_body(const std::string& prompt, int max_tokens) {
  return {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

}  // namespace duet::testing
