#include "server/response_stream.h"

#include <algorithm>
#include <utility>

#include "server/chat_output_parser.h"

namespace duet::server {

using nlohmann::json;

void Channel::push(const TokenEvent& ev) {
  std::lock_guard lock(mu);
  events.push_back(ev);
  events.back().timings = nullptr;
  if (ev.finished && static_cast<size_t>(ev.choice) < timings.size())
    timings[static_cast<size_t>(ev.choice)] = *ev.timings;
  if (ev.request_ended) finished = true;
  cv.notify_one();
}

// Each choice gets its own output parser: they are written apart.
std::shared_ptr<Choices> make_choices(const ResponseShape& base, const GenerateRequest& r) {
  auto choices = std::make_shared<Choices>();
  for (int32_t i = 0; i < r.params.n; ++i) {
    ResponseShape shape = base;
    shape.index = i;
    if (base.chat)
      shape.parser = std::make_shared<ChatOutputParser>(r.format, r.tools.offered(), new_tool_call_id, r.tools.forced());
    choices->push_back(std::make_unique<Choice>(std::move(shape)));
  }
  return choices;
}

ApiError ended_with(const TokenEvent& ev) { return {500, ev.error, "server_error", "", ""}; }

namespace {

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }
std::string sse(const std::vector<json>& chunks) {
  std::string out;
  for (const json& j : chunks) out += sse(j);
  return out;
}
constexpr const char* kDone = "data: [DONE]\n\n";

// What a response makes of the request's events: the text to send as each
// arrives, and whether it completes the response.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual std::string start() { return {}; }
  virtual std::string event(Choice& c, const TokenEvent& ev, bool& ended) = 0;
  // The request was given up on (deadline, shutdown).
  virtual std::string cut(const ApiError& e) = 0;
};

// Server-Sent Events: each choice's role first (or an echoed prompt), then
// deltas as they come, the finish, the usage, [DONE]. A failed choice ends
// the stream with an error event; the others are cancelled.
class SseSink final : public ResponseSink {
 public:
  SseSink(std::shared_ptr<Channel> channel, std::shared_ptr<Choices> choices, bool include_usage)
      : channel_(std::move(channel)), choices_(std::move(choices)), include_usage_(include_usage) {}

  std::string start() override {
    std::string head;
    for (const auto& c : *choices_) {
      if (c->shape.chat) head += sse(stream_chunk(c->shape, "", true, FinishReason::kNone, nullptr));
      else if (!c->shape.echo.empty()) head += sse(stream_chunk(c->shape, c->shape.echo, false, FinishReason::kNone, nullptr));
    }
    return head;
  }

  std::string event(Choice& c, const TokenEvent& ev, bool& ended) override {
    if (ev.token >= 0 && c.shape.logprobs) c.logprobs.add(ev);
    const auto logprobs = [&] { return c.logprobs.empty() ? json(nullptr) : c.logprobs.take(); };
    const bool failed = ev.finished && ev.reason == FinishReason::kError;
    std::string out;
    if (failed) {
      out = sse(ended_with(ev).to_json());
    } else if (ev.finished) {
      out = sse(stream_chunks(c.shape, ev.text, ev.reason, logprobs()));
      if (include_usage_ && ev.request_ended) out += sse(usage_chunk(c.shape, total_usage(channel_->timings)));
    } else if (!ev.text.empty() || !c.logprobs.empty()) {
      out = sse(stream_chunks(c.shape, ev.text, FinishReason::kNone, logprobs()));
    }
    ended = failed || ev.request_ended;
    if (ended) out += kDone;
    return out;
  }

  std::string cut(const ApiError& e) override { return sse(e.to_json()) + kDone; }

 private:
  std::shared_ptr<Channel> channel_;
  std::shared_ptr<Choices> choices_;
  bool include_usage_;
};

// One JSON body: each choice's text and logprobs gathered, the body built
// once every choice has ended (or an error body where one failed).
class WholeSink final : public ResponseSink {
 public:
  WholeSink(std::shared_ptr<Channel> channel, std::shared_ptr<Choices> choices)
      : channel_(std::move(channel)), choices_(std::move(choices)) {}

  std::string event(Choice& c, const TokenEvent& ev, bool& ended) override {
    c.text += ev.text;
    if (ev.token >= 0 && c.shape.logprobs) c.logprobs.add(ev);
    ended = ev.request_ended;
    if (ev.finished) c.last = ev;
    return {};
  }

  std::string cut(const ApiError& e) override { return dump(e.to_json()); }

  // The error a choice ended with, if any did.
  std::optional<ApiError> error() const {
    for (const auto& c : *choices_)
      if (c->last && c->last->reason == FinishReason::kError) return ended_with(*c->last);
    return std::nullopt;
  }

  std::string body() const {
    if (auto e = error()) return dump(e->to_json());
    json out = json::array();
    for (const auto& c : *choices_)
      out.push_back(whole_choice(c->shape, c->text, c->last ? c->last->reason : FinishReason::kNone,
                                 c->shape.logprobs ? c->logprobs.take() : json(nullptr)));
    return dump(full_response(choices_->front()->shape, std::move(out), total_usage(channel_->timings)));
  }

 private:
  std::shared_ptr<Channel> channel_;
  std::shared_ptr<Choices> choices_;
};

// The channel's events once some have come or `until` has passed.
std::deque<TokenEvent> wait_events(Channel& channel, std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(channel.mu);
  channel.cv.wait_until(lock, until, [&] { return !channel.events.empty(); });
  std::deque<TokenEvent> events;
  events.swap(channel.events);
  return events;
}

// Feeds the events to the sink, appending what it sends to `out`; true once
// the response is complete (events after that are not read).
bool pump(std::deque<TokenEvent>& events, Choices& choices, ResponseSink& sink, std::string& out) {
  for (const TokenEvent& ev : events) {
    bool ended = false;
    out += sink.event(*choices[static_cast<size_t>(ev.choice)], ev, ended);
    if (ended) return true;
  }
  return false;
}

constexpr std::chrono::milliseconds kTick{250};

void cancel_unless_finished(Channel& channel, EngineLoop& loop) {
  bool finished;
  {
    std::lock_guard lock(channel.mu);
    finished = channel.finished;
  }
  if (!finished) loop.cancel(channel.id);
}

// The first wait of a whole response: done (the body's status known), or
// still running when the wait ends.
bool wait_whole(Channel& channel, Choices& choices, WholeSink& sink, std::chrono::steady_clock::time_point until) {
  std::string unused;
  for (;;) {
    std::deque<TokenEvent> events = wait_events(channel, until);
    if (pump(events, choices, sink, unused)) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
  }
}

}  // namespace

void respond_stream(HttpResponse& res, std::shared_ptr<Channel> channel, std::shared_ptr<Choices> choices,
                    bool include_usage, EngineLoop& loop, Overdue overdue) {
  auto sink = std::make_shared<SseSink>(channel, choices, include_usage);
  auto first = std::make_shared<bool>(true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [channel, choices, sink, first, overdue, &loop](DataSink& out_sink) {
        std::deque<TokenEvent> events = wait_events(*channel, std::chrono::steady_clock::now() + kTick);
        std::string out = *first ? sink->start() : "";
        *first = false;
        bool ended = pump(events, *choices, *sink, out);
        if (!ended) {
          if (auto e = overdue()) {  // given up on: a final error event so the client knows
            loop.cancel(channel->id);
            out += sink->cut(*e);
            ended = true;
          }
        }
        if (!out.empty() && !out_sink.write(out.data(), out.size())) return false;
        if (ended) out_sink.done();
        return true;
      },
      // Whatever ended the response (a vanished client, a write timeout,
      // shutdown) ends the request; a finished one ignores the cancel.
      [channel, &loop](bool) { cancel_unless_finished(*channel, loop); });
}

void respond_whole(HttpResponse& res, std::shared_ptr<Channel> channel, std::shared_ptr<Choices> choices,
                   EngineLoop& loop, int32_t wait_ms, std::chrono::steady_clock::time_point request_deadline,
                   Overdue overdue) {
  auto sink = std::make_shared<WholeSink>(channel, choices);
  const auto until = std::min(request_deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms));
  if (wait_whole(*channel, *choices, *sink, until)) {
    if (auto e = sink->error()) {
      res.status = e->status;
      return res.set_content(dump(e->to_json()), "application/json");
    }
    return res.set_content(sink->body(), "application/json");
  }
  if (auto e = overdue()) {
    loop.cancel(channel->id);
    res.status = e->status;
    return res.set_content(dump(e->to_json()), "application/json");
  }
  // A long one: the status is sent now and the JSON follows a run of
  // spaces (JSON allows leading whitespace).
  res.set_chunked_content_provider(
      "application/json",
      [channel, choices, sink, overdue, &loop](DataSink& out_sink) {
        std::deque<TokenEvent> events = wait_events(*channel, std::chrono::steady_clock::now() + kTick);
        std::string unused;
        const bool finished = pump(events, *choices, *sink, unused);
        const std::optional<ApiError> late = finished ? std::nullopt : overdue();
        if (!finished && !late) return out_sink.write(" ", 1);
        if (late) loop.cancel(channel->id);
        const std::string body = late ? sink->cut(*late) : sink->body();
        if (!out_sink.write(body.data(), body.size())) return false;
        out_sink.done();
        return true;
      },
      [channel, &loop](bool) { cancel_unless_finished(*channel, loop); });
}

}  // namespace duet::server
