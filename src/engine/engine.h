// The step loop (vLLM's EngineCore.step: schedule → execute → update) that
// both the CLI and the server drive. One step runs one batched forward pass
// over every scheduled sequence's tokens, samples where a sequence has
// caught up, and reports tokens through each request's callback.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace duet {

struct EngineConfig {
  int32_t n_threads = 0;       // 0: all cores
  int32_t ctx = 0;             // max tokens per sequence; 0: the model's context length
  int32_t n_kv_blocks = 0;     // 0: from kv_bytes, else enough for max_seqs sequences of ctx tokens
  size_t kv_bytes = 0;         // KV memory budget; a smaller kv_type fits more blocks in it
  KvType kv_type = KvType::F32;
  // StreamingLLM: keep the first kv_sinks tokens (rounded up to whole
  // blocks) and at least the last kv_window, freeing the blocks between, so
  // generation runs past ctx in bounded memory. 0: off. Turns off prefix
  // caching.
  int32_t kv_window = 0;
  int32_t kv_sinks = 4;
  SchedulerConfig scheduler;
};

class Engine {
 public:
  Engine(Model& model, const EngineConfig& config);

  // Whether submit() would accept this prompt: not empty, valid ids, no
  // longer than the context. Reads only fixed configuration, so any thread
  // may call it.
  Status check_prompt(const std::vector<int32_t>& prompt) const;
  // Queues a request; fails as check_prompt() does.
  Result<int64_t> submit(std::vector<int32_t> prompt, const RequestParams& params,
                         TokenCallback on_token);
  // Turns on speculative decoding for every decoding sequence from the next
  // step on; fails when the draft model cannot draft for this one.
  Status enable_speculation(const SpecConfig& spec);
  bool speculating() const { return drafter_ != nullptr; }

  // Ends a request wherever it is; its callback hears kCancelled.
  void cancel(int64_t id);

  bool idle() const { return scheduler_.empty(); }
  Status step();
  // Steps until no request is left.
  Status run_until_idle();
  // Ends every request with kError and `message` (after a failed step).
  void fail_all(const std::string& message);

  // Counters and histograms, with the gauges filled in as of now.
  EngineMetrics metrics();

  const KvCache& cache() const { return cache_; }
  int32_t ctx() const { return ctx_; }
  ThreadPool& pool() { return pool_; }
  Model& model() { return model_; }

 private:
  void finish(Sequence* seq, FinishReason reason, const std::string& error = {});
  // Reports a token already at the end of seq->tokens; finishes the
  // sequence when it ends it.
  void emit(Sequence* seq, int32_t token, const float* raw_logits);
  Result<std::vector<Sequence*>> propose_drafts();
  // Frees the blocks a KV window (or the model's sliding window) has left.
  void slide_window(Sequence* seq);
  void trim_drafts(const std::vector<Sequence*>& drafted, const std::vector<ScheduledChunk>& chunks);
  int32_t verify_drafts(Sequence* seq, float* rows, std::vector<int32_t>& out,
                        std::vector<float>& raw);
  // Fills presampled_ for the sampled_ entries that can draw in parallel.
  void presample(size_t n_vocab);
  double seconds_since_start() const;

  Model& model_;
  int32_t ctx_;
  ThreadPool pool_;
  KvCache cache_;
  Scheduler scheduler_;
  int32_t kv_window_;
  int32_t kv_sinks_;
  int32_t max_seqs_;
  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;
  int64_t next_id_ = 1;
  Batch batch_;                      // reused every step
  // Sequences sampled this step, in logits-row order: from `row`, n_rows rows.
  struct Sampled {
    Sequence* seq;
    int64_t id;
    size_t row;
    int32_t n_rows;
  };
  std::vector<Sampled> sampled_;
  // A token chosen this step, reported after every sequence has chosen.
  struct Emit {
    size_t entry;  // into sampled_
    int32_t token;
    int64_t raw;   // offset of its raw logits in raw_rows_, or -1
  };
  std::vector<Emit> emits_;
  std::vector<int32_t> new_tokens_;  // one sequence's tokens this step
  std::vector<int32_t> presampled_;  // per sampled_ entry: its token, drawn in parallel, or -1
  std::unique_ptr<Drafter> drafter_;
  SpecConfig spec_;
  std::vector<float> logits_;   // [rows wanting logits][n_vocab]
  std::vector<float> raw_rows_;  // logits rows before the sampler alters them (for logprobs)
  TokenDist target_dist_, residual_;  // verification scratch
  EngineMetrics metrics_;
  RateMeter rate_{5.0};
  Sequence::Clock::time_point started_ = Sequence::Clock::now();
};

}  // namespace duet
