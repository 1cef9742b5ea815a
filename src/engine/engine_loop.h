// The engine behind a thread-safe front, for the server: any thread may
// submit or cancel; one engine thread applies those between steps, runs
// step() while there is work, and sleeps on a condition variable otherwise.
// Callbacks run on the engine thread and must not block; they may call
// cancel().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/engine.h"

namespace duet {

class EngineLoop {
 public:
  // Accepts at most max_in_flight requests at once (submitted, not finished).
  EngineLoop(Engine& engine, int32_t max_in_flight);
  // Ends every request (kCancelled) and stops the thread.
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Reserves room for one request; false when max_in_flight are in flight.
  // Every true must be followed by exactly one submit().
  bool try_reserve();
  // Queues a request (checked now by the engine's prompt and parameter
  // rules); it joins
  // at the next step. Frees the reservation when it fails. The returned id
  // is the engine's, the same in every event, for cancel() and for logs.
  Result<int64_t> submit(std::vector<int32_t> prompt, const RequestParams& params,
                         TokenCallback on_token);
  // Queues embedding inputs (checked now, as Engine::embed checks them) for
  // the engine thread, which pools them between steps. Like submit(), it
  // takes the caller's reservation and frees it when the job ends.
  std::future<Result<Embeddings>> embed(std::vector<std::vector<int32_t>> inputs, Pooling pooling);
  // Ends a request wherever it is; unknown or finished ids are ignored.
  void cancel(int64_t id);

  // The engine's metrics as of the last step (or idle moment).
  EngineMetrics metrics() const;
  int32_t in_flight() const { return in_flight_.load(); }
  const Engine& engine() const { return engine_; }

 private:
  struct Pending {
    int64_t id;
    std::vector<int32_t> prompt;
    RequestParams params;
    TokenCallback on_token;
  };

  struct EmbedJob {
    std::vector<std::vector<int32_t>> inputs;
    Pooling pooling;
    std::promise<Result<Embeddings>> done;
  };

  // A request's last event, copied out of its sequence.
  struct Ending {
    TokenEvent event;
    RequestTimings timings;
    TokenCallback on_token;
  };

  void run();
  void apply(std::vector<Pending>& submits, std::vector<int64_t>& cancels);
  // Pools embedding jobs between steps and answers them.
  void pool(std::vector<EmbedJob>& embeds);
  // Publishes the engine's metrics, then delivers the requests' last events.
  void publish();

  Engine& engine_;
  const int32_t max_in_flight_;
  std::atomic<int32_t> in_flight_{0};

  std::mutex mu_;  // guards the inbox and stop_
  std::condition_variable wake_;
  std::vector<Pending> submits_;
  std::vector<int64_t> cancels_;
  std::vector<EmbedJob> embeds_;
  bool stop_ = false;

  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;

  // Engine thread only: requests submitted and not yet finished.
  std::unordered_set<int64_t> live_;
  std::vector<Ending> endings_;
  std::thread thread_;
};

}  // namespace duet
