// The step loop that every front end drives (run, chat, serve, bench): one
// step is three stages with plain data between them, as in vLLM v1's
// EngineCore —
//   schedule() -> SchedulerOutput   which sequences run, how many tokens each
//   execute    -> ModelOutput       one batched forward pass (ModelRunner)
//   update()                        choose tokens (TokenSelector), report them
//                                   and apply stop rules (OutputProcessor)
// Every way a request ends goes through release().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/embedder.h"
#include "engine/kv_window.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative.h"
#include "engine/token_selector.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace duet {

struct EngineConfig {
  int32_t n_threads = 0;       // 0: all cores
  int32_t ctx = 0;             // max tokens per sequence; 0: the model's context length
  int32_t n_kv_blocks = 0;     // 0: from kv_bytes, else enough for max_seqs sequences of ctx tokens
  size_t kv_bytes = 0;         // KV memory budget; a smaller kv_type fits more blocks in it
  KvType kv_type = KvType::F16;
  // StreamingLLM: keep the first kv_sinks tokens (rounded up to whole
  // blocks) and at least the last kv_window, freeing the blocks between, so
  // generation runs past ctx in bounded memory. 0: off. Turns off prefix
  // caching.
  int32_t kv_window = 0;
  int32_t kv_sinks = 4;
  // Layers with a sliding window keep block tables of their own, freed
  // behind the window (kv/kv_groups.h); false: one table for every layer,
  // which keeps the whole sequence for them too. Off under kv_window.
  bool kv_layer_groups = true;
  SchedulerConfig scheduler;
};

// Why a prompt was refused, for front ends that map it to their own codes.
inline constexpr const char* kContextLengthExceeded = "context_length_exceeded";

class Engine {
 public:
  Engine(Model& model, const EngineConfig& config);

  // The one prompt rule, for every front end: not empty, valid ids, and
  // room in the context for at least one generated token (unless a KV
  // window lets generation run past it). Reads only fixed configuration, so
  // any thread may call it. A too-long prompt's error has code
  // kContextLengthExceeded.
  Status check_prompt(const std::vector<int32_t>& prompt) const;
  // What else a request asks that this engine may refuse: n choices
  // (at least 1; not under a KV window, whose key shifts would rewrite
  // blocks the choices share). Any thread may call it.
  Status check_params(const RequestParams& params) const;
  // What an embedding input must be: not empty, valid ids, and no longer
  // than the context (nothing is generated after it). Any thread; a
  // too-long input's error has code kContextLengthExceeded.
  Status check_embedding_input(const std::vector<int32_t>& input) const;
  // Embeddings (engine/embedder.h) run between steps: running requests
  // keep their blocks, and a job's inputs take what is free.
  // A job for embed_pass(); fails on an input check_embedding_input()
  // refuses, or a pooling that gives no single vector (none, rank).
  Result<std::unique_ptr<EmbeddingJob>> start_embedding(std::vector<std::vector<int32_t>> inputs, Pooling pooling);
  // One forward pass of a job, of at most the scheduler's per-step token
  // budget, so that a caller interleaving passes with step() bounds what a
  // stream waits for. Fails (code kCacheFull) when the job's next input
  // does not fit in the free blocks now and it holds none to go on with.
  Status embed_pass(EmbeddingJob& job);
  // A whole job at once: pools each input's final hidden states.
  Result<Embeddings> embed(const std::vector<std::vector<int32_t>>& inputs, Pooling pooling);
  // A fresh request id; any thread may call it.
  int64_t new_request_id() { return next_id_++; }
  // Queues a request under `id` (0: a fresh one); fails as check_prompt() does.
  Result<int64_t> submit(std::vector<int32_t> prompt, const RequestParams& params,
                         TokenCallback on_token, int64_t id = 0);
  // Turns on speculative decoding for every decoding sequence from the next
  // step on; fails when the draft model cannot draft for this one.
  Status enable_speculation(const SpecConfig& spec);
  bool speculating() const { return speculator_ != nullptr; }

  // Ends a request wherever it is, every choice of it; its callback hears
  // kCancelled. Unknown or finished ids are ignored.
  void cancel(int64_t id);

  bool idle() const { return scheduler_.empty(); }
  // One token through the model before the first request, as llama.cpp
  // warms up by default: a first forward pass grows the workspace into
  // fresh pages and finds nothing in the caches (a 3-token prompt's TTFT at
  // TinyLlama's shape, Q4_K / Q8_0: 27 / 56 ms cold, 15 / 32 ms after).
  // Call it while idle. It leaves nothing a request or /metrics would see:
  // the counters, rates and request ids as they were, a mixture's routing
  // statistics reset, its blocks freed (one partial block, which the prefix cache
  // never keeps).
  Status warm_up(int32_t token);
  Status step();
  // Steps until no request is left.
  Status run_until_idle();
  // Ends every request with kError and `message` (after a failed step).
  void fail_all(const std::string& message);

  // Counters and histograms, with the gauges filled in as of now.
  EngineMetrics metrics();

  const KvCache& cache() const { return cache_; }
  int32_t ctx() const { return ctx_; }
  const Model& model() const { return model_; }
  ThreadPool& threads() { return pool_; }

 private:
  // The three stages.
  Result<SchedulerOutput> schedule();
  void update(const SchedulerOutput& plan, const ModelOutput& out);
  // Tells a request about its token; ends it when the token does.
  void report(const ChosenToken& chosen);
  // Forks the choices of every sequence whose chunk completes its prompt
  // this step (RequestParams::n): each child shares its parent's blocks.
  void fork_choices(SchedulerOutput& plan);
  Sequence* fork(const Sequence& parent, int32_t n_computed, int32_t choice);
  // Tells a request it has ended, then releases it.
  void finish(Sequence* seq, FinishReason reason, const std::string& error = {});
  // Frees everything a sequence holds: its blocks in the target's cache
  // (and with them its prefix-cache references), its draft state, its id.
  void release(Sequence* seq);
  int32_t ctx_room(const Sequence* seq) const;
  double seconds_since_start() const;

  Model& model_;
  const int32_t ctx_;
  ThreadPool pool_;
  KvCache cache_;
  Scheduler scheduler_;
  ModelRunner runner_;
  Embedder embedder_;
  TokenSelector selector_;
  OutputProcessor output_;
  KvWindow window_;
  std::unique_ptr<Speculator> speculator_;  // null: no speculative decoding
  std::shared_ptr<const TokenTrie> trie_;   // built on the first request with a grammar
  int32_t max_seqs_;

  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;
  // Per request id: its sequences not yet ended (its choices, forked or not).
  std::map<int64_t, int32_t> live_choices_;
  std::atomic<int64_t> next_id_{1};

  EngineMetrics metrics_;
  RateMeter rate_{5.0};
  Sequence::Clock::time_point started_ = Sequence::Clock::now();
};

}  // namespace duet
