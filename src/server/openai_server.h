// duet's HTTP server (cpp-httplib): the OpenAI-compatible API over an
// EngineLoop. POST /v1/completions and /v1/chat/completions (streamed as
// Server-Sent Events or whole), GET /v1/models, /health and /metrics
// (Prometheus). Errors are OpenAI error JSON with the matching status; a
// streaming client that goes away cancels its request.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "core/error.h"
#include "engine/engine_loop.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/chat_template.h"

namespace duet::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port
  std::string api_key;              // empty: no authentication
  std::string model_name;           // what /v1/models lists and responses name
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  int read_timeout_s = 10;          // a client that stalls mid-request is dropped
  int32_t http_threads = 64;        // connections served at once
  // A non-streamed request not finished within this long is answered with
  // whitespace heartbeats before its JSON, to notice a client that leaves.
  int32_t whole_response_wait_ms = 1000;
  // The chat template for /v1/chat/completions; null: the built-in Llama 2
  // format where the vocabulary allows it (chat_prompt.h).
  std::shared_ptr<const ChatTemplate> chat_template;
  bool log_requests = true;  // one line on stderr per finished request
};

class OpenAiServer {
 public:
  OpenAiServer(Model& model, EngineLoop& loop, ServerConfig config);
  ~OpenAiServer();

  // Binds the listening socket; returns the port (the chosen one for port 0).
  Result<int> bind();
  // Serves until stop(); returns false if the server failed.
  bool listen();
  // Any thread: stops accepting, ends listen().
  void stop();

 private:
  void routes();
  Status widen_backlog();
  // A generation request as a pipeline: parse -> validate -> submit -> stream.
  void handle_generate(const httplib::Request& req, httplib::Response& res, bool chat);
  std::optional<ApiError> parse(const httplib::Request& req, bool chat, GenerateRequest& r,
                                std::vector<int32_t>& prompt) const;
  std::optional<ApiError> validate(bool chat, const std::vector<int32_t>& prompt, GenerateRequest& r) const;

  Model& model_;
  EngineLoop& loop_;
  ServerConfig config_;
  std::unique_ptr<httplib::Server> http_;
  int listen_fd_ = -1;  // the listening socket, once bound
};

}  // namespace duet::server
