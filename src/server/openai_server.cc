#include "server/openai_server.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/prometheus.h"

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

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.to_json()), "application/json");
}

ApiError error_for_status(int status, const httplib::Request& req, size_t max_body) {
  switch (status) {
    case 404: return {404, "unknown route: " + req.method + " " + req.path, "invalid_request_error", "", "not_found"};
    case 405: return {405, "method not allowed", "invalid_request_error", "", "method_not_allowed"};
    case 413:
      return {413, "the request body is larger than " + std::to_string(max_body) + " bytes",
              "invalid_request_error", "", "payload_too_large"};
    case 414: return {414, "the request URI is too long", "invalid_request_error", "", "uri_too_long"};
    default:
      if (status >= 500) return {status, "internal server error", "server_error", "", ""};
      return {status, "malformed HTTP request", "invalid_request_error", "", ""};
  }
}

// What the engine thread hands to the HTTP thread serving one request.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TokenEvent> events;  // timings pointers cleared
  RequestTimings timings;         // set with the finishing event
  bool finished = false;
  int64_t id = 0;

  void push(const TokenEvent& ev) {
    std::lock_guard lock(mu);
    events.push_back(ev);
    events.back().timings = nullptr;
    if (ev.finished) {
      timings = *ev.timings;
      finished = true;
    }
    cv.notify_one();
  }
};

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }
std::string sse(const std::vector<json>& chunks) {
  std::string out;
  for (const json& j : chunks) out += sse(j);
  return out;
}

// A non-streamed response being gathered from the engine's events.
struct WholeResponse {
  explicit WholeResponse(const ResponseShape& shape) : logprobs(shape) {}
  std::string text;
  LogprobsBuilder logprobs;
  std::optional<TokenEvent> last;  // the finishing event

  // Takes the channel's events; true once the request has finished.
  bool take(Channel& channel, const ResponseShape& shape) {
    for (TokenEvent& ev : channel.events) {
      text += ev.text;
      if (ev.token >= 0 && shape.logprobs) logprobs.add(ev);
      if (ev.finished) last = std::move(ev);
    }
    channel.events.clear();
    return last.has_value();
  }
  std::string body(const ResponseShape& shape, const RequestTimings& timings) {
    if (last->reason == FinishReason::kError)
      return dump(ApiError{500, last->error, "server_error", "", ""}.to_json());
    return dump(full_response(shape, text, last->reason,
                              shape.logprobs ? logprobs.take() : json(nullptr), timings));
  }
};

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

void cancel_unless_finished(Channel& channel, EngineLoop& loop) {
  bool finished;
  {
    std::lock_guard lock(channel.mu);
    finished = channel.finished;
  }
  if (!finished) loop.cancel(channel.id);
}


void respond_whole(httplib::Response& res, std::shared_ptr<Channel> channel,
                   std::shared_ptr<ResponseShape> shape, EngineLoop& loop, int32_t wait_ms) {
  auto whole = std::make_shared<WholeResponse>(*shape);
  {
    // Most requests finish quickly: wait, then answer with the right status.
    std::unique_lock lock(channel->mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (!whole->take(*channel, *shape))
      if (!channel->cv.wait_until(lock, deadline, [&] { return !channel->events.empty(); })) break;
    if (whole->last) {
      if (whole->last->reason == FinishReason::kError)
        return send_error(res, {500, whole->last->error, "server_error", "", ""});
      res.set_content(whole->body(*shape, channel->timings), "application/json");
      return;
    }
  }
  // A long one: the status is sent now and the JSON follows a run of
  // spaces (JSON allows leading whitespace), one every quarter second, so a
  // client that has gone away is noticed by a failed write and its request
  // cancelled instead of generating for nobody.
  res.set_chunked_content_provider(
      "application/json",
      [channel, shape, whole](size_t, httplib::DataSink& sink) {
        bool finished;
        {
          std::unique_lock lock(channel->mu);
          channel->cv.wait_for(lock, std::chrono::milliseconds(250), [&] { return !channel->events.empty(); });
          finished = whole->take(*channel, *shape);
        }
        if (!finished) return sink.write(" ", 1);
        const std::string body = whole->body(*shape, channel->timings);
        if (!sink.write(body.data(), body.size())) return false;
        sink.done();
        return true;
      },
      [channel, &loop](bool) { cancel_unless_finished(*channel, loop); });
}


}  // namespace

OpenAiServer::OpenAiServer(Model& model, EngineLoop& loop, ServerConfig config)
    : model_(model), loop_(loop), config_(std::move(config)), http_(std::make_unique<httplib::Server>()) {
  // httplib's defaults, plus a note of the socket so bind() can widen its
  // backlog.
  http_->set_socket_options([this](int fd) {
    httplib::default_socket_options(fd);
    listen_fd_ = fd;
  });
  routes();
}

// httplib (as Debian builds it) listens with a backlog of 5: a burst of
// connections beyond that (16 clients starting at once) had some dropped
// by the kernel before accept, and those clients saw their connection
// reset. A second listen() on the bound socket sets the backlog anew.
Status OpenAiServer::widen_backlog() {
  if (listen_fd_ < 0 || ::listen(listen_fd_, SOMAXCONN) != 0)
    return err("cannot set the listen backlog on ", config_.host);
  return {};
}

OpenAiServer::~OpenAiServer() { stop(); }

Result<int> OpenAiServer::bind() {
  if (config_.port == 0) {
    const int port = http_->bind_to_any_port(config_.host);
    if (port <= 0) return err("cannot listen on ", config_.host, " (any port)");
    DUET_TRY(widen_backlog());
    return port;
  }
  if (!http_->bind_to_port(config_.host, config_.port))
    return err("cannot listen on ", config_.host, ":", config_.port, " (in use, or not an address here?)");
  DUET_TRY(widen_backlog());
  return config_.port;
}

bool OpenAiServer::listen() { return http_->listen_after_bind(); }

void OpenAiServer::stop() { http_->stop(); }

void OpenAiServer::routes() {
  httplib::Server& s = *http_;
  const size_t threads = static_cast<size_t>(std::max(4, config_.http_threads));
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(config_.max_body_bytes);
  s.set_read_timeout(config_.read_timeout_s, 0);
  s.set_write_timeout(config_.read_timeout_s, 0);
  s.set_keep_alive_timeout(5);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (config_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (same_secret(req.get_header_value("Authorization"), "Bearer " + config_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, {401,
                     req.has_header("Authorization") ? "incorrect API key provided"
                                                     : "missing API key (Authorization: Bearer ...)",
                     "invalid_request_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404, 413, a malformed request) get an
  // OpenAI error body too.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) send_error(res, error_for_status(res.status, req, config_.max_body_bytes));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, {500, "internal server error", "server_error", "", ""});
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(loop_.metrics(), loop_.in_flight()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", config_.model_name}, {"object", "model"}, {"created", 0},
                        {"owned_by", "duet"}, {"max_model_len", loop_.engine().ctx()}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(req, res, false);
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generate(req, res, true);
  });
}

// Parse: the request's JSON into a GenerateRequest and its prompt's ids.
std::optional<ApiError> OpenAiServer::parse(const httplib::Request& req, bool chat, GenerateRequest& r,
                                            std::vector<int32_t>& prompt) const {
  if (auto e = parse_generate_body(req.body, chat, r)) return e;

  const Tokenizer& tok = model_.tokenizer();
  if (chat) {
    std::string text;
    if (auto e = render_chat_request(config_.chat_template.get(), model_, r, text)) return e;
    // Templates write BOS themselves (as bos_token), so none is added here.
    prompt = tok.encode(text, /*add_bos=*/false, /*parse_special=*/true);
  } else if (r.prompt_is_ids) {
    prompt = std::move(r.prompt_ids);
  } else {
    prompt = tok.encode(r.prompt, tok.add_bos_default());
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
  // Completions default to 16 tokens (OpenAI's legacy default), chat to the
  // rest of the context; generation also stops when the context is full.
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  r.params.max_tokens = r.max_tokens ? *r.max_tokens : (chat ? engine.ctx() - n_prompt : 16);
  return std::nullopt;
}

void OpenAiServer::handle_generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  GenerateRequest r;
  std::vector<int32_t> prompt;
  if (auto e = parse(req, chat, r, prompt)) return send_error(res, *e);
  if (auto e = validate(chat, prompt, r)) return send_error(res, *e);

  // Submit.
  if (!loop_.try_reserve()) {
    res.set_header("Retry-After", "1");
    return send_error(res, {503, "the server is busy: its request queue is full; retry later",
                            "server_error", "", "queue_full"});
  }
  auto channel = std::make_shared<Channel>();
  auto shape = std::make_shared<ResponseShape>();
  shape->chat = chat;
  shape->created = static_cast<int64_t>(std::time(nullptr));
  shape->model = r.model.empty() ? config_.model_name : r.model;
  shape->logprobs = r.logprobs >= 0;
  shape->tokenizer = &model_.tokenizer();
  if (chat)
    shape->parser = std::make_shared<ChatOutputParser>(r.format, r.tools.offered(), new_tool_call_id, r.tools.forced());
  const bool log = config_.log_requests;
  auto id = loop_.submit(std::move(prompt), r.params, [channel, chat, log](const TokenEvent& ev) {
    if (ev.finished && log) log_finished(chat, ev);
    channel->push(ev);
  });
  if (!id) return send_error(res, invalid(id.error().message, chat ? "messages" : "prompt", id.error().code));
  // One id from submission on: the engine's, in the response and the log.
  channel->id = *id;
  shape->id = response_id(chat, *id);

  // Stream.
  if (!r.stream) return respond_whole(res, channel, shape, loop_, config_.whole_response_wait_ms);

  const bool include_usage = r.include_usage;
  auto logprobs = std::make_shared<LogprobsBuilder>(*shape);
  auto first = std::make_shared<bool>(true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [channel, shape, logprobs, first, include_usage](size_t, httplib::DataSink& sink) {
        std::deque<TokenEvent> events;
        {
          std::unique_lock lock(channel->mu);
          channel->cv.wait_for(lock, std::chrono::milliseconds(250),
                               [&] { return !channel->events.empty(); });
          events.swap(channel->events);
        }
        if (*first && shape->chat) {
          // The role comes first, as OpenAI sends it.
          *first = false;
          const std::string role = sse(stream_chunk(*shape, "", true, FinishReason::kNone, nullptr));
          if (!sink.write(role.data(), role.size())) return false;
        }
        for (const TokenEvent& ev : events) {
          if (ev.token >= 0 && shape->logprobs) logprobs->add(ev);
          std::string out;
          if (ev.finished && ev.reason == FinishReason::kError) {
            out = sse(ApiError{500, ev.error, "server_error", "", ""}.to_json());
          } else if (ev.finished) {
            out += sse(stream_chunks(*shape, ev.text, ev.reason, logprobs->empty() ? json(nullptr) : logprobs->take()));
            if (include_usage) out += sse(usage_chunk(*shape, channel->timings));
          } else if (!ev.text.empty() || !logprobs->empty()) {
            out = sse(stream_chunks(*shape, ev.text, FinishReason::kNone,
                                    logprobs->empty() ? json(nullptr) : logprobs->take()));
          }
          if (ev.finished) out += "data: [DONE]\n\n";
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (ev.finished) {
            sink.done();
            return true;
          }
        }
        return true;
      },
      // Whatever ended the response (a vanished client, a write timeout,
      // shutdown) ends the request; a finished one ignores the cancel.
      [this, channel](bool) { cancel_unless_finished(*channel, loop_); });
}

}  // namespace duet::server
