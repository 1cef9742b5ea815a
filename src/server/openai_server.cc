#include "server/openai_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>

#include "core/memory_info.h"
#include "server/api_error.h"
#include "server/chat_page.h"
#include "server/chat_prompt.h"
#include "server/completion_prompt.h"
#include "server/embeddings_api.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/prometheus.h"
#include "server/response_stream.h"
#include "server/tokenize_api.h"

namespace duet::server {

using nlohmann::json;

namespace {

// Compares every byte whatever the first difference, so the time taken says
// nothing about how much of a guessed key was right.
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

void send_error(HttpResponse& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.to_json()), "application/json");
}

// What the transport refused (a malformed request, a limit, a slow client)
// as an OpenAI error, so every client sees one error shape.
ApiError transport_error(int status, const std::string& message, const HttpLimits& limits) {
  switch (status) {
    case 408: return {408, message, "invalid_request_error", "", "request_timeout"};
    case 413:
      return {413, "the request body is larger than " + std::to_string(limits.max_body_bytes) + " bytes",
              "invalid_request_error", "", "payload_too_large"};
    case 429: return {429, message, "rate_limit_error", "", "too_many_connections"};
    case 503: return {503, message, "server_error", "", "too_many_connections"};
    case 431:
      return {431, "the request head is larger than " + std::to_string(limits.max_header_bytes) + " bytes",
              "invalid_request_error", "", "header_too_large"};
    default:
      if (status >= 500) return {status, message, "server_error", "", ""};
      return {status, "malformed HTTP request: " + message, "invalid_request_error", "", ""};
  }
}

// One line per finished request, under the id its response carries.
std::string response_id(bool chat, int64_t request_id) {
  return (chat ? "chatcmpl-" : "cmpl-") + std::to_string(request_id);
}

// Runs on the engine thread, from the event alone: the HTTP thread may still
// be filling in the response's shape.
void log_finished(bool chat, const TokenEvent& ev) {
  const RequestTimings& t = *ev.timings;
  const std::string id = response_id(chat, ev.request_id);
  std::fprintf(stderr, "duet: %s %s: %d prompt tokens (%d cached), %d generated, TTFT %.1f ms%s%s\n", id.c_str(),
               finish_reason_name(ev.reason), t.n_prompt, t.n_cached, t.n_generated,
               std::max(0.0, t.first_token) * 1e3, ev.error.empty() ? "" : ": ", ev.error.c_str());
}

}  // namespace

OpenAiServer::OpenAiServer(Model& model, EngineLoop& loop, ServerConfig config)
    : model_(model), loop_(loop), config_(std::move(config)) {
  http_ = std::make_unique<HttpServer>(
      config_.http, std::max(4, config_.http_threads),
      [this](const HttpRequest& req, HttpResponse& res) {
        route(req, res);
        // A large body's parse (and what was built from it) freed many small
        // objects whose pages glibc keeps; 48 such requests at once had left
        // 2.7 GB resident after they ended.
        if (req.body.size() >= PrepGate::kLargeBody) release_free_memory();
      },
      [this](int status, const std::string& message, HttpResponse& res) {
        send_error(res, transport_error(status, message, config_.http));
        if (status == 429 || status == 503) res.set_header("Retry-After", "1");
      });
}

OpenAiServer::~OpenAiServer() = default;

Result<int> OpenAiServer::bind() { return http_->bind(config_.host, config_.port); }

Result<int> OpenAiServer::adopt(Listener listener) { return http_->adopt(listener); }

bool OpenAiServer::listen() {
  http_->run();
  return true;
}

void OpenAiServer::stop() { http_->stop(); }

void OpenAiServer::drain(std::chrono::milliseconds grace) {
  const auto end = Clock::now() + grace;
  drain_deadline_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count();
  http_->drain();
}

std::optional<ApiError> OpenAiServer::overdue(Clock::time_point deadline) const {
  const auto now = Clock::now();
  if (now >= deadline)
    return ApiError{504, "the request did not finish within the server's request timeout of " +
                             std::to_string(config_.request_timeout_ms) + " ms",
                    "server_error", "", "request_timeout"};
  if (now.time_since_epoch().count() >= drain_deadline_ns_.load())
    return ApiError{503, "the server is shutting down: the request was ended before it finished",
                    "server_error", "", "server_shutting_down"};
  return std::nullopt;
}

// A place in the engine's queue, or the 429 that tells the client to back
// off: a full queue is not a server fault.
bool OpenAiServer::admit(HttpResponse& res) {
  if (loop_.try_reserve()) return true;
  res.set_header("Retry-After", "1");
  send_error(res, {429, "the server is busy: its request queue is full; retry later", "rate_limit_error", "",
                   "queue_full"});
  return false;
}

bool OpenAiServer::authorized(const HttpRequest& req, HttpResponse& res) const {
  if (config_.api_key.empty() || req.path == "/health") return true;
  if (same_secret(req.header("Authorization"), "Bearer " + config_.api_key)) return true;
  send_error(res, {401,
                   req.has_header("Authorization") ? "incorrect API key provided"
                                                   : "missing API key (Authorization: Bearer ...)",
                   "invalid_request_error", "", "invalid_api_key"});
  return false;
}

namespace {

// Every route and the methods it takes (for 405s, Allow and preflights).
struct Route {
  const char* path;
  const char* methods;
};
constexpr Route kRoutes[] = {
    {"/", "GET"},
    {"/health", "GET"},          {"/metrics", "GET"},          {"/v1/models", "GET"},
    {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/embeddings", "POST"},
    {"/tokenize", "POST"},       {"/detokenize", "POST"},
};

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

}  // namespace

void OpenAiServer::route(const HttpRequest& req, HttpResponse& res) {
  const Route* known = find_route(req.path);
  // A browser's preflight carries no credentials: it is answered before
  // the API key is asked for.
  if (req.method == "OPTIONS" && known) return answer_options(config_.cors, req, known->methods, res);
  add_cors_headers(config_.cors, req, res);
  const bool get = req.method == "GET", post = req.method == "POST";
  // The page holds no secret: it asks for the key when the API wants one.
  if (req.path == "/" && get) return set_chat_page(res, !config_.api_key.empty());
  if (!authorized(req, res)) return;
  if (req.path == "/health" && get) return handle_health(res);
  if (http_->draining()) {
    res.set_header("Retry-After", "1");
    return send_error(res, {503, "the server is shutting down", "server_error", "", "server_shutting_down"});
  }
  if (req.path == "/metrics" && get)
    return res.set_content(prometheus_text(loop_.metrics(), loop_.in_flight()), "text/plain; version=0.0.4");
  if (req.path == "/v1/models" && get) {
    const json model = {{"id", config_.model_name}, {"object", "model"}, {"created", 0},
                        {"owned_by", "duet"}, {"max_model_len", loop_.engine().ctx()}};
    return res.set_content(dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  }
  if (req.path == "/v1/completions" && post) return handle_generate(req, res, false);
  if (req.path == "/v1/chat/completions" && post) return handle_generate(req, res, true);
  if (req.path == "/v1/embeddings" && post) return handle_embeddings(req, res);
  if ((req.path == "/tokenize" || req.path == "/detokenize") && post) {
    std::string body;
    const Tokenizer& tok = model_.tokenizer();
    const PrepGate::Slot slot = prep_gate_.enter(req.body.size());
    const auto e = req.path == "/tokenize"
                       ? tokenize_body(req.body, tok, static_cast<size_t>(config_.max_tokenize_tokens), body)
                       : detokenize_body(req.body, tok, body);
    if (e) return send_error(res, *e);
    return res.set_content(std::move(body), "application/json");
  }
  if (known) {
    res.set_header("Allow", std::string(known->methods) + ", OPTIONS");
    return send_error(res, {405, "method not allowed", "invalid_request_error", "", "method_not_allowed"});
  }
  send_error(res, {404, "unknown route: " + req.method + " " + req.path, "invalid_request_error", "", "not_found"});
}

// 200 while serving; 503 once a drain has begun, so a load balancer stops
// sending before the port closes. (While the model loads, the startup
// server answers 503 "loading" on the same port: startup_server.h.)
void OpenAiServer::handle_health(HttpResponse& res) const {
  if (http_->draining()) {
    res.status = 503;
    return res.set_content(R"({"status":"shutting_down"})", "application/json");
  }
  res.set_content(R"({"status":"ok"})", "application/json");
}

void OpenAiServer::handle_embeddings(const HttpRequest& req, HttpResponse& res) {
  const Pooling pooling = config_.pooling.value_or(model_.config().pooling);
  if (pooling != Pooling::kMean && pooling != Pooling::kCls && pooling != Pooling::kLast)
    return send_error(res, invalid(std::string("this model's pooling is '") + pooling_name(pooling) +
                                       "', which gives no single vector per input; start the server with "
                                       "--pooling mean, cls or last",
                                   "", "pooling_not_supported"));
  EmbeddingsRequest r;
  {
    const PrepGate::Slot slot = prep_gate_.enter(req.body.size());
    if (auto e = parse_embeddings_body(req.body, model_.tokenizer(), model_.config().dim, config_.embeddings, r))
      return send_error(res, *e);
  }
  const Engine& engine = loop_.engine();
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const std::string where = r.inputs.size() == 1 ? "'input'" : "input[" + std::to_string(i) + "]";
    if (Status st = engine.check_embedding_input(r.inputs[i]); !st)
      return send_error(res, invalid(where + ": " + st.error().message, "input", st.error().code));
    const auto n = static_cast<int32_t>(r.inputs[i].size());
    if (config_.max_prompt_tokens > 0 && n > config_.max_prompt_tokens)
      return send_error(res, invalid(where + " has " + std::to_string(n) + " tokens; this server accepts at most " +
                                         std::to_string(config_.max_prompt_tokens),
                                     "input", "prompt_too_long"));
  }
  if (!admit(res)) return;
  const auto started = Clock::now();
  EngineLoop::PendingEmbeddings pending = loop_.embed(r.inputs, pooling);
  if (config_.request_timeout_ms > 0 &&
      pending.vectors.wait_for(std::chrono::milliseconds(config_.request_timeout_ms)) != std::future_status::ready) {
    loop_.cancel(pending.id);  // its passes stop and its blocks go back
    return send_error(res, *overdue(started));
  }
  const Result<Embeddings> vectors = pending.vectors.get();
  if (!vectors) {
    if (vectors.error().code == kCacheFull) res.set_header("Retry-After", "1");
    const int status = vectors.error().code == kCacheFull || http_->draining() ? 503 : 500;
    return send_error(res, {status, vectors.error().message, "server_error", "", vectors.error().code});
  }
  if (config_.log_requests) {
    size_t n_tokens = 0;
    for (const auto& input : r.inputs) n_tokens += input.size();
    std::fprintf(stderr, "duet: embeddings: %zu inputs, %zu tokens, %.1f ms\n", r.inputs.size(), n_tokens,
                 std::chrono::duration<double, std::milli>(Clock::now() - started).count());
  }
  res.set_content(dump(embeddings_response(r, *vectors, r.model.empty() ? config_.model_name : r.model)),
                  "application/json");
}

// Parse: the request's JSON into a GenerateRequest and its prompt's ids.
std::optional<ApiError> OpenAiServer::parse(const HttpRequest& req, bool chat, GenerateRequest& r,
                                            std::vector<int32_t>& prompt) {
  const PrepGate::Slot slot = prep_gate_.enter(req.body.size());
  if (auto e = parse_generate_body(req.body, chat, r)) return e;

  const Tokenizer& tok = model_.tokenizer();
  if (chat) {
    std::string text;
    if (auto e = render_chat_request(config_.chat_template.get(), model_, r, text)) return e;
    // Templates write BOS themselves (as bos_token), so none is added here.
    prompt = tok.encode(text, /*add_bos=*/false, /*parse_special=*/true);
  } else {
    if (auto e = completion_prompt(tok, r, prompt)) return e;
  }
  return std::nullopt;
}

// Validate: the engine's one prompt rule, then the defaults that depend on
// the prompt's length.
std::optional<ApiError> OpenAiServer::validate(bool chat, const std::vector<int32_t>& prompt,
                                               GenerateRequest& r) const {
  const Engine& engine = loop_.engine();
  if (Status st = engine.check_prompt(prompt); !st)
    return invalid(st.error().message, chat ? "messages" : "prompt", st.error().code);
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  if (config_.max_prompt_tokens > 0 && n_prompt > config_.max_prompt_tokens)
    return invalid("the prompt has " + std::to_string(n_prompt) + " tokens; this server accepts at most " +
                       std::to_string(config_.max_prompt_tokens),
                   chat ? "messages" : "prompt", "prompt_too_long");
  const int32_t cap = config_.max_tokens_limit;
  if (cap > 0 && r.max_tokens && *r.max_tokens > cap)
    return invalid("max_tokens is " + std::to_string(*r.max_tokens) + "; this server allows at most " +
                       std::to_string(cap),
                   "max_tokens", "max_tokens_too_large");
  // Completions default to 16 tokens (OpenAI's legacy default), chat to the
  // rest of the context (within the cap); generation also stops when the
  // context is full.
  r.params.max_tokens = r.max_tokens ? *r.max_tokens : (chat ? engine.ctx() - n_prompt : 16);
  if (cap > 0) r.params.max_tokens = std::min(r.params.max_tokens, cap);
  return validate_choices(r);
}

// n under --max-n and what the engine allows; logit_bias naming tokens of
// the vocabulary.
std::optional<ApiError> OpenAiServer::validate_choices(const GenerateRequest& r) const {
  if (r.params.n > config_.max_n)
    return invalid("n is " + std::to_string(r.params.n) + "; this server allows at most " +
                       std::to_string(config_.max_n) + " choices per request",
                   "n", "n_too_large");
  if (Status st = loop_.engine().check_params(r.params); !st) return invalid(st.error().message, "n");
  const int32_t n_vocab = model_.config().n_vocab;
  for (const TokenBias& b : r.params.sampling.logit_bias)
    if (b.token >= n_vocab)
      return invalid("'logit_bias' key '" + std::to_string(b.token) + "' is not a token id of this model (its " +
                         std::to_string(n_vocab) + " tokens are 0 to " + std::to_string(n_vocab - 1) + ")",
                     "logit_bias");
  return std::nullopt;
}

void OpenAiServer::handle_generate(const HttpRequest& req, HttpResponse& res, bool chat) {
  GenerateRequest r;
  std::vector<int32_t> prompt;
  if (auto e = parse(req, chat, r, prompt)) return send_error(res, *e);
  if (auto e = validate(chat, prompt, r)) return send_error(res, *e);

  // Submit.
  if (!admit(res)) return;
  const Clock::time_point deadline = config_.request_timeout_ms > 0
                                         ? Clock::now() + std::chrono::milliseconds(config_.request_timeout_ms)
                                         : Clock::time_point::max();
  Overdue overdue = [this, deadline] { return this->overdue(deadline); };
  auto channel = std::make_shared<Channel>(r.params.n);
  ResponseShape base;
  base.chat = chat;
  base.created = static_cast<int64_t>(std::time(nullptr));
  base.model = r.model.empty() ? config_.model_name : r.model;
  base.logprobs = r.logprobs >= 0;
  base.tokenizer = &model_.tokenizer();
  base.roofline = &config_.roofline;
  if (r.echo) base.echo = r.prompt;
  const bool log = config_.log_requests;
  auto id = loop_.submit(std::move(prompt), r.params, [channel, chat, log](const TokenEvent& ev) {
    if (ev.request_ended && log) log_finished(chat, ev);
    channel->push(ev);
  });
  if (!id) return send_error(res, invalid(id.error().message, chat ? "messages" : "prompt", id.error().code));
  // One id from submission on: the engine's, in the response and the log.
  channel->id = *id;
  base.id = response_id(chat, *id);
  std::shared_ptr<Choices> choices = make_choices(base, r);

  // Stream, or answer whole.
  if (r.stream) return respond_stream(res, channel, choices, r.include_usage, loop_, overdue);
  respond_whole(res, channel, choices, loop_, config_.whole_response_wait_ms, deadline, overdue);
}

}  // namespace duet::server
