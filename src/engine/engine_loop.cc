#include "engine/engine_loop.h"

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

std::future<Result<Embeddings>> EngineLoop::embed(std::vector<std::vector<int32_t>> inputs, Pooling pooling) {
  EmbedJob job{std::move(inputs), pooling, {}};
  std::future<Result<Embeddings>> result = job.done.get_future();
  for (const std::vector<int32_t>& input : job.inputs)
    if (Status st = engine_.check_embedding_input(input); !st) {
      job.done.set_value(st.error());
      --in_flight_;
      return result;
    }
  {
    std::lock_guard lock(mu_);
    if (!stop_) {
      embeds_.push_back(std::move(job));
      wake_.notify_one();
      return result;
    }
  }
  job.done.set_value(Error{"the server is shutting down", {}});
  --in_flight_;
  return result;
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
  for (int64_t id : cancels) engine_.cancel(id);
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
}

void EngineLoop::pool(std::vector<EmbedJob>& embeds) {
  std::vector<Result<Embeddings>> results;
  for (EmbedJob& job : embeds) results.push_back(engine_.embed(job.inputs, job.pooling));
  publish();  // as with answers: counted before they are heard
  for (size_t i = 0; i < embeds.size(); ++i) {
    embeds[i].done.set_value(std::move(results[i]));
    --in_flight_;
  }
  embeds.clear();
}

void EngineLoop::run() {
  std::vector<Pending> submits;
  std::vector<int64_t> cancels;
  std::vector<EmbedJob> embeds;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || !submits_.empty() || !cancels_.empty() || !embeds_.empty() || !engine_.idle();
      });
      if (stop_) break;
      submits.swap(submits_);
      cancels.swap(cancels_);
      embeds.swap(embeds_);
    }
    apply(submits, cancels);
    submits.clear();
    cancels.clear();
    if (!embeds.empty()) pool(embeds);
    if (!engine_.idle()) {
      if (Status st = engine_.step(); !st) engine_.fail_all("the engine failed: " + st.error().message);
    }
    publish();
  }
  // Shutting down: everyone still waiting hears kCancelled.
  {
    std::lock_guard lock(mu_);
    submits.swap(submits_);
    embeds.swap(embeds_);
  }
  for (EmbedJob& job : embeds) {
    job.done.set_value(Error{"the server is shutting down", {}});
    --in_flight_;
  }
  apply(submits, cancels);
  const std::vector<int64_t> ids(live_.begin(), live_.end());
  for (int64_t id : ids) engine_.cancel(id);
  publish();
}

}  // namespace duet
