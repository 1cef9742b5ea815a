// duet's HTTP server: the OpenAI-compatible API over an EngineLoop, on the
// HttpServer transport. POST /v1/completions and /v1/chat/completions
// (streamed as Server-Sent Events or whole), POST /v1/embeddings, GET
// /v1/models, /health (503 once shutting down) and /metrics (Prometheus),
// llama.cpp's POST /tokenize and /detokenize, and / (the chat page,
// chat_page.h); CORS for browsers when origins are configured (cors.h).
// Errors are OpenAI error JSON with the matching status; a streaming client that goes away cancels its request. A full
// queue is 429 with Retry-After; a request past its deadline, or still
// running when a drain's grace ends, ends with an error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>
#include <string>
#include <thread>

#include "core/error.h"
#include "engine/engine_loop.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/cors.h"
#include "server/embeddings_api.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/prep_gate.h"
#include "server/request_stats.h"
#include "tokenizer/chat_template.h"

namespace duet::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port
  std::string api_key;              // empty: no authentication
  std::string model_name;           // what /v1/models lists and responses name
  HttpLimits http;                  // sizes, deadlines, connections per address
  int32_t http_threads = 64;        // requests handled at once (streams included)
  int32_t max_tokens_limit = 0;     // a larger max_tokens is a 400; 0: no cap
  int32_t max_prompt_tokens = 0;    // a longer prompt is a 400; 0: the context
  int32_t max_n = 16;               // most choices (n) per request; more is a 400
  // Most tokens /tokenize returns for one request (0: no cap); more is a
  // 400. With pieces, 256 K tokens are a response of ~5 MB.
  int32_t max_tokenize_tokens = 1 << 18;
  int32_t request_timeout_ms = 0;   // a request still running then ends with an error; 0: none
  // A non-streamed request not finished within this long is answered with
  // whitespace heartbeats before its JSON, to notice a client that leaves.
  int32_t whole_response_wait_ms = 1000;
  // The chat template for /v1/chat/completions; null: the built-in Llama 2
  // format where the vocabulary allows it (chat_prompt.h).
  std::shared_ptr<const ChatTemplate> chat_template;
  bool log_requests = true;  // one line on stderr per finished request
  CorsPolicy cors;           // no origins: no CORS headers
  // How /v1/embeddings pools; unset: the model's pooling_type.
  std::optional<Pooling> pooling;
  EmbeddingLimits embeddings;  // inputs and tokens per /v1/embeddings request
  // What each response's "timings" judge its phases against (request_stats.h).
  RooflineBasis roofline;
};

class OpenAiServer {
 public:
  OpenAiServer(Model& model, EngineLoop& loop, ServerConfig config);
  ~OpenAiServer();

  using Clock = std::chrono::steady_clock;

  // Binds the listening socket; returns the port (the chosen one for port 0).
  Result<int> bind();
  // Or takes over a listening socket (StartupServer::hand_over).
  Result<int> adopt(Listener listener);
  // Serves until stop(), or until a drain has ended; returns false if the
  // server failed.
  bool listen();
  // Any thread: closes every connection, ends listen().
  void stop();
  // Any thread: stops accepting; requests running may go on for `grace`,
  // then end with a final error event; listen() returns once all have ended.
  void drain(std::chrono::milliseconds grace);

 private:
  void route(const HttpRequest& req, HttpResponse& res);
  bool authorized(const HttpRequest& req, HttpResponse& res) const;
  bool admit(HttpResponse& res);
  // A generation request as a pipeline: parse -> validate -> submit -> stream.
  void handle_generate(const HttpRequest& req, HttpResponse& res, bool chat);
  void handle_embeddings(const HttpRequest& req, HttpResponse& res);
  void handle_health(HttpResponse& res) const;
  std::optional<ApiError> parse(const HttpRequest& req, bool chat, GenerateRequest& r,
                                std::vector<int32_t>& prompt);
  std::optional<ApiError> validate(bool chat, const std::vector<int32_t>& prompt, GenerateRequest& r) const;
  std::optional<ApiError> validate_choices(const GenerateRequest& r) const;
  // Why a request still running must end now (its deadline has passed, or
  // the drain's grace is over); nullopt while it may go on.
  std::optional<ApiError> overdue(Clock::time_point deadline) const;

  Model& model_;
  EngineLoop& loop_;
  ServerConfig config_;
  std::unique_ptr<HttpServer> http_;
  // When a drain's grace ends (steady clock, ns); max: not draining.
  std::atomic<int64_t> drain_deadline_ns_{INT64_MAX};
  PrepGate prep_gate_{static_cast<int>(std::thread::hardware_concurrency())};
};

}  // namespace duet::server
