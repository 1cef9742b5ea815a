#include "engine/engine_loop.h"

#include <algorithm>

namespace duet {

EngineLoop::EngineLoop(Engine& engine, int32_t max_in_flight)
    : engine_(engine), max_in_flight_(max_in_flight), metrics_(engine.metrics()) {
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool EngineLoop::try_reserve() {
  int32_t n = in_flight_.load();
  while (n < max_in_flight_)
    if (in_flight_.compare_exchange_weak(n, n + 1)) return true;
  return false;
}

Result<int64_t> EngineLoop::submit(std::vector<int32_t> prompt, const RequestParams& params,
                                   TokenCallback on_token) {
  Status st = engine_.check_prompt(prompt);
  if (st) st = engine_.check_params(params);
  if (!st) {
    --in_flight_;
    return st.error();
  }
  const int64_t id = engine_.new_request_id();
  // The reservation ends when the request does, whatever ends it.
  TokenCallback wrapped = [this, cb = std::move(on_token)](const TokenEvent& ev) {
    if (cb) cb(ev);
    if (ev.request_ended) --in_flight_;
  };
  {
    std::lock_guard lock(mu_);
    submits_.push_back({id, std::move(prompt), params, std::move(wrapped)});
  }
  wake_.notify_one();
  return id;
}

EngineLoop::PendingEmbeddings EngineLoop::embed(std::vector<std::vector<int32_t>> inputs, Pooling pooling) {
  EmbedRequest request{engine_.new_request_id(), std::move(inputs), pooling, {}};
  PendingEmbeddings pending{request.id, request.done.get_future()};
  for (const std::vector<int32_t>& input : request.inputs)
    if (Status st = engine_.check_embedding_input(input); !st) {
      request.done.set_value(st.error());
      --in_flight_;
      return pending;
    }
  {
    std::lock_guard lock(mu_);
    if (!stop_) {
      embeds_.push_back(std::move(request));
      wake_.notify_one();
      return pending;
    }
  }
  request.done.set_value(Error{"the server is shutting down", {}});
  --in_flight_;
  return pending;
}

void EngineLoop::cancel(int64_t id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

EngineMetrics EngineLoop::metrics() const {
  std::lock_guard lock(metrics_mu_);
  return metrics_;
}

void EngineLoop::apply(std::vector<Pending>& submits, std::vector<int64_t>& cancels) {
  for (Pending& p : submits) {
    const int64_t id = p.id;
    TokenCallback cb = [this, id, inner = std::move(p.on_token)](const TokenEvent& ev) {
      if (!ev.request_ended) return inner(ev);
      live_.erase(id);
      // Held until the step's metrics are published, so that a client
      // holding its whole answer finds it counted on /metrics.
      endings_.push_back({ev, ev.timings ? *ev.timings : RequestTimings{}, inner});
    };
    live_.insert(id);
    auto submitted = engine_.submit(std::move(p.prompt), p.params, cb, id);
    if (!submitted) {
      TokenEvent ev;
      ev.request_id = id;
      ev.finished = true;
      ev.request_ended = true;
      ev.reason = FinishReason::kError;
      ev.error = submitted.error().message;
      cb(ev);
    }
  }
  // Cancels are applied after the submits they may follow; the engine
  // ignores an id that has finished already.
  for (int64_t id : cancels)
    if (!cancel_embedding(id)) engine_.cancel(id);
}

void EngineLoop::start_embeddings(std::vector<EmbedRequest>& requests) {
  for (EmbedRequest& r : requests) {
    auto job = engine_.start_embedding(std::move(r.inputs), r.pooling);
    if (job) embedding_.push_back({r.id, std::move(*job), std::move(r.done)});
    else answers_.push_back({std::move(r.done), job.error()});
  }
  requests.clear();
}

void EngineLoop::embed_pass() {
  Embedding e = std::move(embedding_.front());
  embedding_.pop_front();
  const Status st = engine_.embed_pass(*e.job);
  // No room for its next input: it waits for blocks that will come back.
  if (!st && st.error().code == kCacheFull && blocks_will_come_back()) return embedding_.push_back(std::move(e));
  if (!st) return answer(e, st.error());
  if (e.job->done()) return answer(e, e.job->take_vectors());
  embedding_.push_back(std::move(e));  // its next turn comes after the others'
}

bool EngineLoop::blocks_will_come_back() const {
  return !engine_.idle() ||
         std::any_of(embedding_.begin(), embedding_.end(), [](const Embedding& e) { return e.job->holds_blocks(); });
}

void EngineLoop::answer(Embedding& e, Result<Embeddings> result) {
  e.job.reset();  // its blocks are free before the metrics are published
  answers_.push_back({std::move(e.done), std::move(result)});
}

bool EngineLoop::cancel_embedding(int64_t id) {
  const auto it = std::find_if(embedding_.begin(), embedding_.end(), [id](const Embedding& e) { return e.id == id; });
  if (it == embedding_.end()) return false;
  answer(*it, Error{"the embedding request was cancelled", {}});
  embedding_.erase(it);
  return true;
}

void EngineLoop::publish() {
  EngineMetrics m = engine_.metrics();
  {
    std::lock_guard lock(metrics_mu_);
    metrics_ = std::move(m);
  }
  std::vector<Ending> endings;
  endings.swap(endings_);
  for (Ending& e : endings) {
    if (e.event.timings) e.event.timings = &e.timings;  // the sequence it pointed into is gone
    e.on_token(e.event);
  }
  std::vector<Answer> answers;
  answers.swap(answers_);
  for (Answer& a : answers) {
    a.done.set_value(std::move(a.result));
    --in_flight_;
  }
}

void EngineLoop::run() {
  std::vector<Pending> submits;
  std::vector<int64_t> cancels;
  std::vector<EmbedRequest> embeds;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || !submits_.empty() || !cancels_.empty() || !embeds_.empty() || !engine_.idle() ||
               !embedding_.empty();
      });
      if (stop_) break;
      submits.swap(submits_);
      cancels.swap(cancels_);
      embeds.swap(embeds_);
    }
    start_embeddings(embeds);  // before the cancels, which may name them
    apply(submits, cancels);
    submits.clear();
    cancels.clear();
    // One embedding pass, then one step: between two steps the engine
    // thread runs at most one pass of at most a step's token budget.
    if (!embedding_.empty()) embed_pass();
    if (!engine_.idle()) {
      if (Status st = engine_.step(); !st) engine_.fail_all("the engine failed: " + st.error().message);
    }
    publish();
  }
  // Shutting down: everyone still waiting hears kCancelled, or an error.
  {
    std::lock_guard lock(mu_);
    submits.swap(submits_);
    embeds.swap(embeds_);
  }
  for (EmbedRequest& r : embeds) answers_.push_back({std::move(r.done), Error{"the server is shutting down", {}}});
  for (Embedding& e : embedding_) answer(e, Error{"the server is shutting down", {}});
  embedding_.clear();
  apply(submits, cancels);
  const std::vector<int64_t> ids(live_.begin(), live_.end());
  for (int64_t id : ids) engine_.cancel(id);
  publish();
}

}  // namespace duet
