#include "engine/engine.h"

#include <algorithm>
#include <unordered_map>

#include "engine/grammar_vocab.h"
#include "kv/prefix_cache.h"

namespace duet {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context_full";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    default: return "none";
  }
}

namespace {

// Layers of different windows keep tables of their own unless a
// StreamingLLM window (which moves every layer's positions alike) or the
// config says otherwise.
KvShape cache_shape(const EngineConfig& c, const Model& model) {
  const KvShape shape = model.kv_shape();
  return c.kv_window > 0 || !c.kv_layer_groups ? with_one_table(shape) : shape;
}

int32_t default_blocks(const EngineConfig& c, const KvShape& shape, int32_t ctx) {
  if (c.n_kv_blocks > 0) return c.n_kv_blocks;
  if (c.kv_bytes > 0) return KvCache::blocks_for_bytes(shape, c.kv_type, c.kv_bytes);
  int32_t per_seq = blocks_for_tokens(ctx);
  // A window holds its sinks, the window, a chunk of up to a window, and
  // the partial blocks at either end.
  if (c.kv_window > 0)
    per_seq = std::max(per_seq, blocks_for_tokens(c.kv_sinks) + 2 * blocks_for_tokens(c.kv_window) + 2);
  // A group of windowed layers holds its window, a step's tokens and the
  // partial blocks at either end.
  const KvGroups groups = KvGroups::of(shape.n_layers, shape.layer_window);
  if (groups.n_groups() > 1) {
    const int32_t step = c.scheduler.max_chunk_tokens > 0 ? c.scheduler.max_chunk_tokens : c.scheduler.max_batch_tokens;
    int32_t sum = 0;
    for (int32_t w : groups.window)
      sum += w > 0 ? std::min(per_seq, blocks_for_tokens(w) + blocks_for_tokens(std::max(step, 1)) + 2) : per_seq;
    per_seq = sum;
  }
  return per_seq * std::max(1, c.scheduler.max_seqs);
}

KvCache engine_cache(const EngineConfig& c, const Model& model, int32_t ctx) {
  const KvShape shape = cache_shape(c, model);
  return KvCache(shape, default_blocks(c, shape, ctx), c.kv_type);
}

SchedulerConfig scheduler_config(const EngineConfig& c) {
  SchedulerConfig s = c.scheduler;
  // A window moves keys between positions: cached blocks would not match.
  if (c.kv_window > 0) {
    s.prefix_caching = false;
    // A prompt longer than the window is prefilled a window at a time.
    s.max_chunk_tokens = s.max_chunk_tokens > 0 ? std::min(s.max_chunk_tokens, c.kv_window) : c.kv_window;
  }
  return s;
}

// Filled slots of distinct blocks: a block shared by several sequences
// stores its tokens once. Every group of layers' blocks count (their slots
// are each 16 tokens of the group's layers), so over the used blocks' slots
// this is how full the blocks are.
int64_t tokens_stored(const std::vector<Sequence*>& running) {
  std::unordered_map<int32_t, int32_t> filled;
  for (const Sequence* seq : running)
    for (const std::vector<int32_t>& blocks : seq->table.groups)
      for (size_t k = 0; k < blocks.size(); ++k) {
        if (blocks[k] == kNoBlock) continue;
        const int32_t n = std::clamp(seq->cache_len() - static_cast<int32_t>(k) * kBlockTokens, 0, kBlockTokens);
        int32_t& f = filled[blocks[k]];
        f = std::max(f, n);
      }
  int64_t total = 0;
  for (const auto& [block, n] : filled) total += n;
  return total;
}

PoolGauges gauges_of(const BlockPool& pool) {
  return {pool.n_blocks(), pool.n_used(), pool.n_cached(), pool.n_free() - pool.n_cached()};
}

}  // namespace

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model),
      ctx_(config.ctx > 0 ? config.ctx : model.config().ctx_len),
      pool_(config.n_threads),
      cache_(engine_cache(config, model, ctx_)),
      scheduler_(scheduler_config(config)),
      runner_(model, cache_, pool_),
      embedder_(model, cache_, pool_, config.scheduler.max_batch_tokens),
      output_(model.tokenizer(), model.config().n_vocab, ctx_, config.kv_window <= 0),
      window_(config.kv_window, config.kv_sinks),
      max_seqs_(std::max(1, config.scheduler.max_seqs)) {
  model_.set_context(ctx_);
}

Status Engine::check_prompt(const std::vector<int32_t>& prompt) const {
  if (prompt.empty()) return err("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) >= ctx_ && !window_.unbounded()) {
    Error e = err("the prompt has ", prompt.size(), " tokens; the context of ", ctx_,
                  " tokens must leave room for at least one generated token");
    e.code = kContextLengthExceeded;
    return e;
  }
  for (int32_t t : prompt)
    if (t < 0 || t >= model_.config().n_vocab)
      return err("token id ", t, " is out of range (vocabulary has ", model_.config().n_vocab, ")");
  return {};
}

Status Engine::check_params(const RequestParams& params) const {
  if (params.n < 1) return err("n must be at least 1, not ", params.n);
  if (params.n > 1 && window_.unbounded())
    return err("n > 1 is not supported with a KV window: the window's key shifts would rewrite the blocks the ",
               params.n, " choices share");
  return {};
}

Status Engine::check_embedding_input(const std::vector<int32_t>& input) const {
  if (input.empty()) return err("the input is empty");
  if (static_cast<int64_t>(input.size()) > ctx_) {
    Error e = err("the input has ", input.size(), " tokens; the context holds ", ctx_);
    e.code = kContextLengthExceeded;
    return e;
  }
  for (int32_t t : input)
    if (t < 0 || t >= model_.config().n_vocab)
      return err("token id ", t, " is out of range (vocabulary has ", model_.config().n_vocab, ")");
  return {};
}

Result<std::unique_ptr<EmbeddingJob>> Engine::start_embedding(std::vector<std::vector<int32_t>> inputs,
                                                              Pooling pooling) {
  for (const std::vector<int32_t>& input : inputs) DUET_TRY(check_embedding_input(input));
  return embedder_.start(std::move(inputs), pooling);
}

Status Engine::embed_pass(EmbeddingJob& job) {
  DUET_ASSIGN(const int32_t n_run, embedder_.run_pass(job));
  metrics_.embedding_tokens += n_run;
  return {};
}

Result<Embeddings> Engine::embed(const std::vector<std::vector<int32_t>>& inputs, Pooling pooling) {
  DUET_ASSIGN(std::unique_ptr<EmbeddingJob> job, start_embedding(inputs, pooling));
  while (!job->done()) DUET_TRY(embed_pass(*job));
  return job->take_vectors();
}

Result<int64_t> Engine::submit(std::vector<int32_t> prompt, const RequestParams& params,
                               TokenCallback on_token, int64_t id) {
  DUET_TRY(check_prompt(prompt));
  DUET_TRY(check_params(params));
  if (id == 0) id = new_request_id();
  if (params.grammar && !trie_) {
    trie_ = make_token_trie(model_.tokenizer());
    selector_.set_vocabulary(trie_);
    if (speculator_) speculator_->set_vocabulary(trie_);
  }
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), params, std::move(on_token));
  seq->text.emplace(model_.tokenizer(), params.stop, params.continues_prompt);
  metrics_.prompt_tokens += seq->n_prompt;
  scheduler_.add(seq.get());
  sequences_.emplace(id, std::move(seq));
  live_choices_[id] = 1;
  return id;
}

void Engine::cancel(int64_t id) {
  std::vector<int64_t> choices;
  for (const auto& [key, seq] : sequences_)
    if (seq->request_id == id) choices.push_back(key);
  // Looked up again each time: a callback hearing one choice's end may
  // have ended the others.
  for (int64_t key : choices)
    if (auto it = sequences_.find(key); it != sequences_.end()) finish(it->second.get(), FinishReason::kCancelled);
}

Sequence* Engine::fork(const Sequence& parent, int32_t n_computed, int32_t choice) {
  RequestParams params = parent.params;
  params.sampling.seed += static_cast<uint64_t>(choice);
  const int64_t id = new_request_id();
  auto seq = std::make_unique<Sequence>(id, parent.tokens, params, parent.on_token);
  seq->request_id = parent.request_id;
  seq->choice = choice;
  seq->pending_choices = 0;
  seq->n_computed = n_computed;
  seq->n_evicted = parent.n_evicted;
  seq->table = parent.table.share(cache_.pool());
  seq->block_hashes = parent.block_hashes;
  seq->submitted = parent.submitted;
  seq->timings.n_cached = parent.timings.n_cached;
  seq->text.emplace(model_.tokenizer(), params.stop, params.continues_prompt);
  Sequence* child = seq.get();
  scheduler_.add_running(child);
  sequences_.emplace(id, std::move(seq));
  ++live_choices_[parent.request_id];
  return child;
}

void Engine::fork_choices(SchedulerOutput& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* parent = c.seq;
    if (parent->pending_choices == 0 || !c.samples()) continue;
    // A prompt is never drafted on, so the whole chunk is computed.
    const int32_t computed = parent->n_computed + c.n_tokens;
    for (int32_t choice = 1; choice <= parent->pending_choices; ++choice)
      plan.forks.push_back({parent, fork(*parent, computed, choice)});
    metrics_.forked_choices += parent->pending_choices;
    metrics_.fork_shared_blocks += int64_t{parent->table.n_held()} * parent->pending_choices;
    parent->pending_choices = 0;
  }
}

void Engine::finish(Sequence* seq, FinishReason reason, const std::string& error) {
  // A callback that cancels its own request while hearing its end.
  if (seq->ended) return;
  seq->ended = true;
  ++metrics_.finished_by_reason[static_cast<size_t>(reason)];
  metrics_.preemptions += seq->timings.n_preemptions;
  TokenEvent ev = output_.finish_event(seq, reason, error);
  auto live = live_choices_.find(seq->request_id);
  ev.request_ended = live == live_choices_.end() || --live->second == 0;
  if (ev.request_ended && live != live_choices_.end()) live_choices_.erase(live);
  if (seq->on_token) seq->on_token(ev);  // ev.timings points into seq: it still exists
  release(seq);
}

void Engine::release(Sequence* seq) {
  scheduler_.remove(seq, cache_.pool());
  if (speculator_) speculator_->release(seq);
  sequences_.erase(seq->id);
}

Status Engine::enable_speculation(const SpecConfig& spec) {
  if (spec.draft_max < 1) return err("the draft length must be at least 1, not ", spec.draft_max);
  if (spec.lookup < 0) return err("the lookup n-gram length must be >= 0, not ", spec.lookup);
  std::unique_ptr<Drafter> drafter;
  if (spec.draft) {
    DUET_ASSIGN(drafter, make_model_drafter(*spec.draft, model_, ctx_, max_seqs_, spec.draft_max));
  } else if (spec.lookup > 0) {
    drafter = make_lookup_drafter(spec.lookup);
  }
  speculator_ = drafter ? std::make_unique<Speculator>(std::move(drafter), spec.draft_max) : nullptr;
  if (speculator_ && trie_) speculator_->set_vocabulary(trie_);
  return {};
}

int32_t Engine::ctx_room(const Sequence* seq) const {
  return window_.unbounded() ? seq->params.max_tokens : ctx_ - seq->size();
}

Result<SchedulerOutput> Engine::schedule() {
  for (Sequence* seq : scheduler_.running())
    metrics_.kv_evicted_tokens += window_.slide(seq, cache_, model_, pool_);
  if (speculator_)
    DUET_TRY(speculator_->propose(scheduler_.running(), [this](const Sequence* s) { return ctx_room(s); }, pool_));
  SchedulerOutput plan = scheduler_.schedule(cache_.pool());
  if (speculator_) {
    speculator_->trim(plan);
    for (Sequence* seq : plan.preempted) speculator_->release(seq);
  }
  for (Sequence* seq : plan.unfittable)
    finish(seq, FinishReason::kError,
           "the KV cache is too small for this sequence (" + std::to_string(seq->size()) +
               " tokens, " + std::to_string(cache_.pool().n_blocks() / cache_.groups().n_groups() * kBlockTokens) +
               " token slots in all)");
  fork_choices(plan);
  metrics_.kv_block_copies += static_cast<int64_t>(plan.copies.size());
  return plan;
}

void Engine::update(const SchedulerOutput& plan, const ModelOutput& out) {
  // Draft tokens count as computed only once verified.
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* seq = c.seq;
    metrics_.prompt_tokens_computed += std::max(0, std::min(seq->n_computed + c.n_tokens, seq->n_prompt) - seq->n_computed);
    seq->n_computed += c.n_tokens - c.n_draft;
  }
  // Every sequence chooses before any is reported: reports may end
  // sequences, and the prefix cache must see the final tokens.
  const std::vector<ChosenToken>& chosen = selector_.select(out, speculator_.get(), cache_.pool(), pool_);
  if (scheduler_.prefix_caching())
    for (const ScheduledChunk& c : plan.chunks)
      cache_full_blocks(cache_.pool(), c.seq->tokens, c.seq->n_computed, c.seq->table, c.seq->block_hashes);
  for (const ChosenToken& t : chosen)
    if (sequences_.count(t.id)) report(t);  // an earlier report may have ended it
  rate_.add(seconds_since_start(), static_cast<int64_t>(chosen.size()));
}

void Engine::report(const ChosenToken& chosen) {
  Sequence* seq = chosen.seq;
  const TokenOutcome o = output_.process(seq, chosen.token, selector_.raw_row(chosen), metrics_);
  if (seq->on_token) seq->on_token(o.event);
  if (!sequences_.count(chosen.id)) return;  // the callback cancelled it
  if (o.finish != FinishReason::kNone) finish(seq, o.finish);
}

Status Engine::step() {
  DUET_ASSIGN(const SchedulerOutput plan, schedule());
  if (plan.empty()) return {};
  DUET_ASSIGN(const ModelOutput out, runner_.execute(plan));
  ++metrics_.steps;
  update(plan, out);
  return {};
}

Status Engine::run_until_idle() {
  while (!idle()) DUET_TRY(step());
  return {};
}

Status Engine::warm_up(int32_t token) {
  const EngineMetrics metrics = metrics_;
  const RateMeter rate = rate_;
  const int64_t next_id = next_id_.load();
  RequestParams params;
  params.sampling = SamplingParams::greedy();
  params.max_tokens = 1;
  params.ignore_eos = true;
  auto id = submit({token}, params, [](const TokenEvent&) {});
  Status st = id ? run_until_idle() : Status(id.error());
  metrics_ = metrics;
  rate_ = rate;
  next_id_.store(next_id);  // the first request is still cmpl-1
  model_.reset_expert_token_counts();
  return st;
}

void Engine::fail_all(const std::string& message) {
  while (!sequences_.empty()) finish(sequences_.begin()->second.get(), FinishReason::kError, message);
}

double Engine::seconds_since_start() const {
  return std::chrono::duration<double>(Sequence::Clock::now() - started_).count();
}

EngineMetrics Engine::metrics() {
  EngineMetrics m = metrics_;
  m.prefix_query_tokens = scheduler_.prefix_query_tokens();
  m.prefix_hit_tokens = scheduler_.prefix_hit_tokens();
  m.waiting = static_cast<int32_t>(scheduler_.n_waiting());
  m.running = static_cast<int32_t>(scheduler_.n_running());
  m.kv = gauges_of(cache_.pool());
  if (speculator_ && speculator_->block_pool()) m.draft_kv = gauges_of(*speculator_->block_pool());
  m.kv_type = cache_.type();
  m.kv_bytes_per_token = static_cast<int64_t>(cache_.bytes_per_token());
  m.kv_bytes_total = static_cast<int64_t>(cache_.bytes_total());
  m.kv_tokens_stored = tokens_stored(scheduler_.running());
  const SpecCounts& spec = selector_.spec_counts();
  m.spec_draft_tokens = spec.drafted;
  m.spec_accepted_tokens = spec.accepted;
  m.spec_verify_passes = spec.passes;
  // Preemptions of requests still running count too.
  for (const auto& [id, seq] : sequences_) m.preemptions += seq->timings.n_preemptions;
  m.generated_tokens_per_second = rate_.rate(seconds_since_start());
  m.expert_tokens = model_.expert_token_counts();
  m.n_experts = model_.config().n_experts;
  return m;
}

}  // namespace duet
