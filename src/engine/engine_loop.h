// The engine behind a thread-safe front, for the server: any thread may
// submit or cancel; one engine thread applies those between steps, runs
// step() while there is work, and sleeps on a condition variable otherwise.
// Callbacks run on the engine thread and must not block; they may call
// cancel().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/embedding_job.h"
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
  // An embedding request's id (for cancel() and logs) and its vectors to come.
  struct PendingEmbeddings {
    int64_t id;
    std::future<Result<Embeddings>> vectors;
  };
  // Queues embedding inputs (checked now, as Engine::embed checks them) for
  // the engine thread. It runs them a forward pass at a time, one pass (the
  // scheduler's per-step token budget) between two steps, the jobs taking
  // turns: a large request goes on in slices, and neither streams nor other
  // requests wait for all of it. A job whose next input finds no free
  // blocks waits for them while running requests or other jobs hold some.
  // Like submit(), it takes the caller's reservation and frees it when the
  // job ends.
  PendingEmbeddings embed(std::vector<std::vector<int32_t>> inputs, Pooling pooling);
  // Ends a request, or an embedding job, wherever it is; unknown or
  // finished ids are ignored.
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

  struct EmbedRequest {
    int64_t id;
    std::vector<std::vector<int32_t>> inputs;
    Pooling pooling;
    std::promise<Result<Embeddings>> done;
  };

  // An embedding job the engine thread runs pass by pass.
  struct Embedding {
    int64_t id;
    std::unique_ptr<EmbeddingJob> job;
    std::promise<Result<Embeddings>> done;
  };

  // An embedding job's result, held until the metrics counting it are published.
  struct Answer {
    std::promise<Result<Embeddings>> done;
    Result<Embeddings> result;
  };

  // A request's last event, copied out of its sequence.
  struct Ending {
    TokenEvent event;
    RequestTimings timings;
    TokenCallback on_token;
  };

  void run();
  void apply(std::vector<Pending>& submits, std::vector<int64_t>& cancels);
  void start_embeddings(std::vector<EmbedRequest>& requests);
  // One forward pass of the embedding job whose turn it is.
  void embed_pass();
  // Whether blocks now held will be given back without a job that waits
  // for them: a running request's, or another job's part-run input's.
  // With none, a job that finds no room never will.
  bool blocks_will_come_back() const;
  // Ends the job's request with `result` (answered at the next publish()).
  void answer(Embedding& e, Result<Embeddings> result);
  // False when no embedding job has that id.
  bool cancel_embedding(int64_t id);
  // Publishes the engine's metrics, then delivers the requests' last events
  // and the embedding jobs' results.
  void publish();

  Engine& engine_;
  const int32_t max_in_flight_;
  std::atomic<int32_t> in_flight_{0};

  std::mutex mu_;  // guards the inbox and stop_
  std::condition_variable wake_;
  std::vector<Pending> submits_;
  std::vector<int64_t> cancels_;
  std::vector<EmbedRequest> embeds_;
  bool stop_ = false;

  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;

  // Engine thread only: requests submitted and not yet finished.
  std::unordered_set<int64_t> live_;
  std::vector<Ending> endings_;
  std::deque<Embedding> embedding_;  // the front one runs the next pass
  std::vector<Answer> answers_;
  std::thread thread_;
};

}  // namespace duet
