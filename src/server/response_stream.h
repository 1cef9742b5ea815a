// A generation request's response, from the engine's events: one sequence
// of events per request (each choice's text, logprobs, finish, the request's
// end or error) fed to one of two sinks — Server-Sent Events written as the
// events come, or a whole JSON body assembled at the end — over one
// transport loop that also ends a request the server gave up on (deadline,
// shutdown) and cancels one whose client went away.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_loop.h"
#include "server/api_error.h"
#include "server/http_message.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace duet::server {

// What the engine thread hands to the HTTP thread serving one request.
struct Channel {
  explicit Channel(int32_t n_choices) : timings(static_cast<size_t>(n_choices)) {}
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TokenEvent> events;        // timings pointers cleared
  std::vector<RequestTimings> timings;  // per choice, set with its finishing event
  bool finished = false;                // every choice has ended
  int64_t id = 0;

  void push(const TokenEvent& ev);
};

// One choice of a response: its shape (index, chat output parser) and what
// has been gathered of it.
struct Choice {
  explicit Choice(ResponseShape s) : shape(std::move(s)), logprobs(shape) {}
  ResponseShape shape;
  LogprobsBuilder logprobs;
  std::string text;                // whole responses
  std::optional<TokenEvent> last;  // its finishing event
};
using Choices = std::vector<std::unique_ptr<Choice>>;

// The choices of request `r`, each with its own chat output parser.
std::shared_ptr<Choices> make_choices(const ResponseShape& base, const GenerateRequest& r);

// Why a request still running must end now (deadline, shutdown); nullopt
// while it may go on.
using Overdue = std::function<std::optional<ApiError>()>;

// Streams the request's events as SSE chunks.
void respond_stream(HttpResponse& res, std::shared_ptr<Channel> channel, std::shared_ptr<Choices> choices,
                    bool include_usage, EngineLoop& loop, Overdue overdue);

// Answers with one JSON body: waits up to wait_ms (or the request's
// deadline) to send the right status, then, for a long request, sends a
// space every quarter second until the body, so that a client that left
// is noticed and its request cancelled.
void respond_whole(HttpResponse& res, std::shared_ptr<Channel> channel, std::shared_ptr<Choices> choices,
                   EngineLoop& loop, int32_t wait_ms, std::chrono::steady_clock::time_point request_deadline,
                   Overdue overdue);

// The error a choice ended with, as the client sees it.
ApiError ended_with(const TokenEvent& ev);

}  // namespace duet::server
