#include "engine/engine.h"

#include <algorithm>
#include <unordered_map>

#include "engine/logprobs.h"
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

int32_t default_blocks(const EngineConfig& c, const KvShape& shape, int32_t ctx) {
  if (c.n_kv_blocks > 0) return c.n_kv_blocks;
  if (c.kv_bytes > 0) return KvCache::blocks_for_bytes(shape, c.kv_type, c.kv_bytes);
  int32_t per_seq = blocks_for_tokens(ctx);
  // A window holds its sinks, the window, a chunk of up to a window, and
  // the partial blocks at either end.
  if (c.kv_window > 0)
    per_seq = std::max(per_seq, blocks_for_tokens(c.kv_sinks) + 2 * blocks_for_tokens(c.kv_window) + 2);
  return per_seq * std::max(1, c.scheduler.max_seqs);
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

}  // namespace

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model),
      ctx_(config.ctx > 0 ? config.ctx : model.config().ctx_len),
      pool_(config.n_threads),
      cache_(model.kv_shape(), default_blocks(config, model.kv_shape(), ctx_), config.kv_type),
      scheduler_(scheduler_config(config)),
      kv_window_(config.kv_window),
      kv_sinks_(config.kv_sinks),
      max_seqs_(std::max(1, config.scheduler.max_seqs)),
      logits_(static_cast<size_t>(std::max(1, config.scheduler.max_seqs)) *
              static_cast<size_t>(model.config().n_vocab)) {}

Status Engine::check_prompt(const std::vector<int32_t>& prompt) const {
  if (prompt.empty()) return err("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) > ctx_ && kv_window_ <= 0)
    return err("the prompt has ", prompt.size(), " tokens, more than the context of ", ctx_,
               " tokens");
  for (int32_t t : prompt)
    if (t < 0 || t >= model_.config().n_vocab)
      return err("token id ", t, " is out of range (vocabulary has ", model_.config().n_vocab, ")");
  return {};
}

Result<int64_t> Engine::submit(std::vector<int32_t> prompt, const RequestParams& params,
                               TokenCallback on_token) {
  DUET_TRY(check_prompt(prompt));
  const int64_t id = next_id_++;
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), params, std::move(on_token));
  seq->text.emplace(model_.tokenizer(), params.stop);
  metrics_.prompt_tokens += seq->n_prompt;
  scheduler_.add(seq.get());
  sequences_.emplace(id, std::move(seq));
  return id;
}

void Engine::cancel(int64_t id) {
  auto it = sequences_.find(id);
  if (it != sequences_.end()) finish(it->second.get(), FinishReason::kCancelled);
}

void Engine::finish(Sequence* seq, FinishReason reason, const std::string& error) {
  scheduler_.remove(seq, cache_.pool());
  ++metrics_.finished_by_reason[static_cast<size_t>(reason)];
  metrics_.preemptions += seq->timings.n_preemptions;
  const int64_t id = seq->id;
  TokenEvent ev;
  ev.request_id = id;
  // A stop string already ended the text; any other end releases what was held.
  if (reason != FinishReason::kStop || !seq->stop_matched) ev.text = seq->text->finish().text;
  ev.finished = true;
  ev.reason = reason;
  ev.error = error;
  ev.timings = &seq->timings;
  // The callback runs while the sequence still exists (ev.timings points
  // into it); moving it out first makes a re-entrant cancel() a no-op.
  TokenCallback cb = std::move(seq->on_token);
  seq->on_token = nullptr;
  if (cb) cb(ev);
  sequences_.erase(id);
}

Status Engine::enable_speculation(const SpecConfig& spec) {
  if (spec.draft_max < 1) return err("the draft length must be at least 1, not ", spec.draft_max);
  if (spec.lookup < 0) return err("the lookup n-gram length must be >= 0, not ", spec.lookup);
  if (spec.draft) {
    DUET_ASSIGN(drafter_, make_model_drafter(*spec.draft, model_, ctx_, max_seqs_, spec.draft_max));
  } else if (spec.lookup > 0) {
    drafter_ = make_lookup_drafter(spec.lookup);
  } else {
    drafter_.reset();
  }
  spec_ = spec;
  return {};
}

void Engine::emit(Sequence* seq, int32_t token, const float* raw_logits) {
  const double t = seq->seconds_since_submit();
  if (seq->timings.first_token < 0) {
    seq->timings.first_token = t;
    metrics_.ttft.observe(t);
  } else {
    metrics_.itl.observe(t - seq->timings.token_times.back());
  }
  seq->timings.token_times.push_back(t);
  ++seq->timings.n_generated;
  ++metrics_.generated_tokens;

  TokenEvent ev;
  ev.request_id = seq->id;
  ev.token = token;
  ev.timings = &seq->timings;
  if (raw_logits) {
    const int32_t n_vocab = model_.config().n_vocab;
    const float lse = log_sum_exp(raw_logits, n_vocab);
    ev.logprob = raw_logits[token] - lse;
    ev.top_logprobs = top_logprobs(raw_logits, n_vocab, seq->params.logprobs, lse);
  }

  // Accepted draft tokens may already stand after this one in seq->tokens:
  // the limits count the tokens reported so far.
  const int32_t n_reported = seq->n_prompt + seq->timings.n_generated;
  FinishReason reason = FinishReason::kNone;
  const bool eos = !seq->params.ignore_eos && model_.tokenizer().is_end_of_generation(token);
  if (!eos) {
    StopText::Piece piece = seq->text->push(token);
    ev.text = std::move(piece.text);
    seq->stop_matched = piece.stopped;
  }
  if (eos || seq->stop_matched)
    reason = FinishReason::kStop;
  else if (seq->timings.n_generated >= seq->params.max_tokens)
    reason = FinishReason::kLength;
  else if (n_reported >= ctx_ && kv_window_ <= 0)
    reason = FinishReason::kContext;

  const int64_t id = seq->id;
  if (seq->on_token) seq->on_token(ev);
  if (!sequences_.count(id)) return;  // the callback cancelled it
  if (reason != FinishReason::kNone) finish(seq, reason);
}

Result<std::vector<Sequence*>> Engine::propose_drafts() {
  std::vector<Sequence*> drafted;
  if (!drafter_) return drafted;
  for (Sequence* seq : scheduler_.running()) {
    // Only sequences decoding: their one pending token is the last sampled.
    if (seq->n_pending() != 1 || seq->n_generated() == 0) continue;
    const int32_t ctx_room = kv_window_ > 0 ? seq->params.max_tokens : ctx_ - seq->size();
    const int32_t room = std::min(seq->params.max_tokens - seq->n_generated(), ctx_room) - 1;
    seq->spec.k = std::min(adaptive_draft_len(seq->spec.accept_rate, spec_.draft_max), room);
    if (seq->spec.k > 0) drafted.push_back(seq);
  }
  if (!drafted.empty()) DUET_TRY(drafter_->propose(drafted, pool_));
  return drafted;
}

// Drops draft tokens the schedule has no room to verify (a token budget cut
// the chunk short, or the sequence was preempted).
void Engine::trim_drafts(const std::vector<Sequence*>& drafted,
                         const std::vector<ScheduledChunk>& chunks) {
  for (Sequence* seq : drafted) {
    int32_t allowed = 0;
    for (const ScheduledChunk& c : chunks)
      if (c.seq == seq) allowed = std::max(0, c.n_tokens - 1);
    SpecState& s = seq->spec;
    if (s.n_draft <= allowed) continue;
    seq->tokens.resize(seq->tokens.size() - static_cast<size_t>(s.n_draft - allowed));
    s.q.resize(static_cast<size_t>(allowed));
    s.n_draft = allowed;
    drafter_->keep(seq, seq->size());
  }
}

// Tests seq's draft tokens against the target's logits rows (one per draft
// token, then one past the last) in order, stopping at the first rejection.
// Leaves seq->tokens ending in the accepted drafts and one more token drawn
// by the target (a replacement, or a bonus when all were accepted); `out`
// gets those tokens. Returns how many drafts were accepted.
int32_t Engine::verify_drafts(Sequence* seq, float* rows, std::vector<int32_t>& out,
                              std::vector<float>& raw) {
  SpecState& s = seq->spec;
  const int32_t n_vocab = model_.config().n_vocab;
  const int32_t base = seq->size() - s.n_draft;
  const std::span<const int32_t> tokens(seq->tokens);
  int32_t accepted = 0;
  for (int32_t j = 0; j <= s.n_draft; ++j) {
    float* row = rows + static_cast<size_t>(j) * n_vocab;
    if (seq->params.logprobs >= 0) raw.insert(raw.end(), row, row + n_vocab);
    seq->sampler.distribution(row, n_vocab, tokens.first(static_cast<size_t>(base + j)), target_dist_);
    if (j == s.n_draft) {
      out.push_back(seq->sampler.draw(target_dist_));
      break;
    }
    const int32_t d = seq->tokens[static_cast<size_t>(base + j)];
    const Verdict v = accept_or_resample(target_dist_, s.q[static_cast<size_t>(j)], d, seq->sampler, residual_);
    out.push_back(v.token);
    s.accept_rate = 0.9 * s.accept_rate + (v.accepted ? 0.1 : 0.0);
    if (!v.accepted) break;
    ++accepted;
  }
  seq->timings.n_drafted += s.n_draft;
  seq->timings.n_accepted += accepted;
  metrics_.spec_draft_tokens += s.n_draft;
  metrics_.spec_accepted_tokens += accepted;
  ++metrics_.spec_verify_passes;

  seq->tokens.resize(static_cast<size_t>(base + accepted));
  seq->tokens.push_back(out.back());
  // The rejected drafts' K/V stay in their slots, to be overwritten: rolling
  // back is only dropping whole blocks past the accepted tokens.
  seq->n_computed = base + accepted;
  seq->table.truncate(cache_.pool(), seq->cache_len());
  drafter_->keep(seq, seq->n_computed);
  s.n_draft = 0;
  s.q.clear();
  return accepted;
}

void Engine::slide_window(Sequence* seq) {
  const int32_t len = seq->cache_len();
  const int32_t model_window = model_.config().sliding_window;
  if (kv_window_ <= 0) {
    // The model attends only to its last sliding_window positions: blocks
    // wholly before them are never read again.
    if (model_window > 0 && len > model_window)
      seq->table.release_front(cache_.pool(), (len - model_window) / kBlockTokens);
    return;
  }
  const int32_t sink_tokens = blocks_for_tokens(kv_sinks_) * kBlockTokens;
  const int32_t n = std::max(0, len - sink_tokens - kv_window_) / kBlockTokens;
  if (n == 0) return;
  // StreamingLLM: drop whole blocks after the sinks, and re-rotate the keys
  // that move down so positions stay contiguous (the model never sees a
  // position past sinks + window + one step's tokens).
  seq->table.erase(cache_.pool(), sink_tokens / kBlockTokens, n);
  seq->n_evicted += n * kBlockTokens;
  model_.shift_keys(cache_, seq->table, sink_tokens, len - n * kBlockTokens, -n * kBlockTokens, pool_);
  metrics_.kv_evicted_tokens += n * kBlockTokens;
}

Status Engine::step() {
  for (Sequence* seq : scheduler_.running()) slide_window(seq);
  DUET_ASSIGN(const std::vector<Sequence*> drafted, propose_drafts());
  std::vector<Sequence*> unfittable;
  const std::vector<ScheduledChunk> chunks = scheduler_.schedule(cache_.pool(), unfittable);
  if (!drafted.empty()) trim_drafts(drafted, chunks);
  for (Sequence* seq : unfittable)
    finish(seq, FinishReason::kError,
           "the KV cache is too small for this sequence (" + std::to_string(seq->size()) +
               " tokens, " + std::to_string(cache_.pool().n_blocks() * kBlockTokens) +
               " token slots in all)");
  if (chunks.empty()) return {};

  batch_.clear();
  sampled_.clear();
  size_t n_rows = 0;
  for (const ScheduledChunk& c : chunks) {
    Sequence* seq = c.seq;
    const int32_t s = batch_.add_sequence(&seq->table);
    const bool caught_up = seq->n_computed + c.n_tokens == seq->size();
    // Verifying drafts needs the logits after every token of the chunk.
    const bool every_row = seq->spec.n_draft > 0;
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      const int32_t index = seq->n_computed + j;
      batch_.add(seq->tokens[static_cast<size_t>(index)], index - seq->n_evicted, s,
                 every_row || (caught_up && j == c.n_tokens - 1));
    }
    if (!caught_up) continue;
    const int32_t rows = every_row ? c.n_tokens : 1;
    sampled_.push_back({seq, seq->id, n_rows, rows});
    n_rows += static_cast<size_t>(rows);
  }
  const auto n_vocab = static_cast<size_t>(model_.config().n_vocab);
  if (logits_.size() < n_rows * n_vocab) logits_.resize(n_rows * n_vocab);

  DUET_TRY(model_.forward(batch_, cache_, pool_, logits_.data()));
  ++metrics_.steps;

  // Draft tokens count as computed only once verified.
  for (const ScheduledChunk& c : chunks) c.seq->n_computed += c.n_tokens - c.seq->spec.n_draft;

  // Choose every sequence's new tokens first, then report them: callbacks
  // may end sequences, and the prefix cache must see the final tokens.
  std::vector<Emit>& emits = emits_;
  emits.clear();
  raw_rows_.clear();
  std::vector<int32_t>& out = new_tokens_;
  presample(n_vocab);
  for (size_t e = 0; e < sampled_.size(); ++e) {
    Sequence* seq = sampled_[e].seq;
    float* row = logits_.data() + sampled_[e].row * n_vocab;
    ++seq->timings.n_passes;
    const bool want_raw = seq->params.logprobs >= 0;
    const auto raw_start = static_cast<int64_t>(raw_rows_.size());
    out.clear();
    if (seq->spec.n_draft > 0) {
      verify_drafts(seq, row, out, raw_rows_);
    } else {
      if (want_raw) raw_rows_.insert(raw_rows_.end(), row, row + n_vocab);
      const int32_t drawn = presampled_[e];
      out.push_back(drawn >= 0 ? drawn : seq->sampler.sample(row, static_cast<int32_t>(n_vocab), seq->tokens));
      seq->tokens.push_back(out.back());
    }
    for (size_t i = 0; i < out.size(); ++i)
      emits.push_back({e, out[i], want_raw ? raw_start + static_cast<int64_t>(i * n_vocab) : -1});
  }
  if (scheduler_.prefix_caching())
    for (const ScheduledChunk& c : chunks)
      cache_full_blocks(cache_.pool(), c.seq->tokens, c.seq->n_computed, c.seq->table,
                        c.seq->block_hashes);

  for (const Emit& em : emits) {
    const Sampled& entry = sampled_[em.entry];
    // A callback may have ended this sequence (or another): skip what it had left.
    if (!sequences_.count(entry.id)) continue;
    emit(entry.seq, em.token, em.raw >= 0 ? raw_rows_.data() + em.raw : nullptr);
  }
  rate_.add(seconds_since_start(), static_cast<int64_t>(emits.size()));
  return {};
}

// Each sequence samples from its own logits row with its own sampler, so the
// plain ones (no drafts to verify, no raw logits to keep before penalties
// alter the row) draw their tokens on the pool at once: with 16 streams a
// full-vocabulary sort per sequence was ~10 % of a step on one thread.
void Engine::presample(size_t n_vocab) {
  presampled_.assign(sampled_.size(), -1);
  pool_.parallel_for(static_cast<int64_t>(sampled_.size()), 1, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      Sequence* seq = sampled_[static_cast<size_t>(e)].seq;
      if (seq->spec.n_draft > 0 || seq->params.logprobs >= 0) continue;
      float* row = logits_.data() + sampled_[static_cast<size_t>(e)].row * n_vocab;
      presampled_[static_cast<size_t>(e)] = seq->sampler.sample(row, static_cast<int32_t>(n_vocab), seq->tokens);
    }
  });
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
  const BlockPool& pool = cache_.pool();
  m.kv_blocks_total = pool.n_blocks();
  m.kv_blocks_used = pool.n_used();
  m.kv_blocks_cached = pool.n_cached();
  m.kv_blocks_free = pool.n_free() - pool.n_cached();
  m.kv_type = cache_.type();
  m.kv_bytes_per_token = static_cast<int64_t>(cache_.bytes_per_token());
  m.kv_bytes_total = static_cast<int64_t>(cache_.bytes_total());
  // Filled slots of distinct blocks: a block shared by several sequences
  // stores its tokens once.
  std::unordered_map<int32_t, int32_t> filled;
  for (const Sequence* seq : scheduler_.running()) {
    for (size_t k = 0; k < seq->table.blocks.size(); ++k) {
      if (seq->table.blocks[k] == kNoBlock) continue;
      const int32_t n = std::clamp(seq->cache_len() - static_cast<int32_t>(k) * kBlockTokens, 0, kBlockTokens);
      int32_t& f = filled[seq->table.blocks[k]];
      f = std::max(f, n);
    }
  }
  for (const auto& [block, n] : filled) m.kv_tokens_stored += n;
  // Preemptions of requests still running count too.
  for (const auto& [id, seq] : sequences_) m.preemptions += seq->timings.n_preemptions;
  m.generated_tokens_per_second = rate_.rate(seconds_since_start());
  return m;
}

Status Engine::run_until_idle() {
  while (!idle()) DUET_TRY(step());
  return {};
}

}  // namespace duet
