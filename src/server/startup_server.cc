#include "server/startup_server.h"

#include "server/api_error.h"

namespace duet::server {

namespace {

void answer_loading(const HttpRequest& req, HttpResponse& res) {
  res.status = 503;
  res.set_header("Retry-After", "1");
  if (req.path == "/health") return res.set_content(R"({"status":"loading"})", "application/json");
  res.set_content(dump(ApiError{503, "the model is still loading; retry shortly", "server_error", "", "loading"}.to_json()),
                  "application/json");
}

}  // namespace

StartupServer::StartupServer(HttpLimits limits)
    : http_(std::make_unique<HttpServer>(
          limits, 2, answer_loading, [](int status, const std::string& message, HttpResponse& res) {
            res.status = status;
            res.set_content(dump(invalid(message).to_json()), "application/json");
          })) {}

StartupServer::~StartupServer() { stop(); }

Result<int> StartupServer::start(const std::string& host, int port) {
  DUET_ASSIGN(const int bound, http_->bind(host, port));
  thread_ = std::thread([this] { http_->run(); });
  return bound;
}

Listener StartupServer::hand_over() {
  if (!thread_.joinable()) return {};
  const Listener l = http_->release_listener();
  // Answers already begun are finished (their 503s); only then does the
  // stand-in close.
  http_->drain();
  thread_.join();
  http_.reset();
  return l;
}

void StartupServer::stop() {
  if (!thread_.joinable()) return;
  http_->stop();
  thread_.join();
  http_.reset();  // the listening socket closes here, freeing the port
}

}  // namespace duet::server
