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
  return blocks_for_tokens(ctx) * std::max(1, c.scheduler.max_seqs);
}

}  // namespace

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model),
      ctx_(config.ctx > 0 ? config.ctx : model.config().ctx_len),
      pool_(config.n_threads),
      cache_(model.kv_shape(), default_blocks(config, model.kv_shape(), ctx_), config.kv_type),
      scheduler_(config.scheduler),
      logits_(static_cast<size_t>(std::max(1, config.scheduler.max_seqs)) *
              static_cast<size_t>(model.config().n_vocab)) {}

Status Engine::check_prompt(const std::vector<int32_t>& prompt) const {
  if (prompt.empty()) return err("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) > ctx_)
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

void Engine::on_sampled(Sequence* seq, int32_t token, const float* raw_logits) {
  seq->tokens.push_back(token);
  const double t = seq->seconds_since_submit();
  if (seq->timings.first_token < 0) {
    seq->timings.first_token = t;
    metrics_.ttft.observe(t);
  } else {
    metrics_.itl.observe(t - seq->timings.token_times.back());
  }
  seq->timings.token_times.push_back(t);
  seq->timings.n_generated = seq->n_generated();
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

  FinishReason reason = FinishReason::kNone;
  const bool eos = !seq->params.ignore_eos && model_.tokenizer().is_end_of_generation(token);
  if (!eos) {
    StopText::Piece piece = seq->text->push(token);
    ev.text = std::move(piece.text);
    seq->stop_matched = piece.stopped;
  }
  if (eos || seq->stop_matched)
    reason = FinishReason::kStop;
  else if (seq->n_generated() >= seq->params.max_tokens)
    reason = FinishReason::kLength;
  else if (seq->size() >= ctx_)
    reason = FinishReason::kContext;

  const int64_t id = seq->id;
  if (seq->on_token) seq->on_token(ev);
  if (!sequences_.count(id)) return;  // the callback cancelled it
  if (reason != FinishReason::kNone) finish(seq, reason);
}

Status Engine::step() {
  std::vector<Sequence*> unfittable;
  const std::vector<ScheduledChunk> chunks = scheduler_.schedule(cache_.pool(), unfittable);
  for (Sequence* seq : unfittable)
    finish(seq, FinishReason::kError,
           "the KV cache is too small for this sequence (" + std::to_string(seq->size()) +
               " tokens, " + std::to_string(cache_.pool().n_blocks() * kBlockTokens) +
               " token slots in all)");
  if (chunks.empty()) return {};

  batch_.clear();
  std::vector<Sequence*>& sampled = sampled_;
  sampled.clear();
  for (const ScheduledChunk& c : chunks) {
    Sequence* seq = c.seq;
    const int32_t s = batch_.add_sequence(&seq->table);
    const bool caught_up = seq->n_computed + c.n_tokens == seq->size();
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      const int32_t pos = seq->n_computed + j;
      batch_.add(seq->tokens[static_cast<size_t>(pos)], pos, s, caught_up && j == c.n_tokens - 1);
    }
    if (caught_up) sampled.push_back(seq);
  }

  DUET_TRY(model_.forward(batch_, cache_, pool_, logits_.data()));
  ++metrics_.steps;

  for (const ScheduledChunk& c : chunks) {
    Sequence* seq = c.seq;
    seq->n_computed += c.n_tokens;
    if (scheduler_.prefix_caching())
      cache_full_blocks(cache_.pool(), seq->tokens, seq->n_computed, seq->table, seq->block_hashes);
  }
  const int32_t n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < sampled.size(); ++i) {
    Sequence* seq = sampled[i];
    float* row = logits_.data() + i * static_cast<size_t>(n_vocab);
    const float* raw = nullptr;
    if (seq->params.logprobs >= 0) {
      raw_row_.assign(row, row + n_vocab);
      raw = raw_row_.data();
    }
    on_sampled(seq, seq->sampler.sample(row, n_vocab, seq->tokens), raw);
  }
  rate_.add(seconds_since_start(), static_cast<int64_t>(sampled.size()));
  return {};
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
      const int32_t n = std::clamp(seq->n_computed - static_cast<int32_t>(k) * kBlockTokens, 0, kBlockTokens);
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
