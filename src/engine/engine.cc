#include "engine/engine.h"

#include <algorithm>

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

int32_t default_blocks(const EngineConfig& c, int32_t ctx) {
  if (c.n_kv_blocks > 0) return c.n_kv_blocks;
  return blocks_for_tokens(ctx) * std::max(1, c.scheduler.max_seqs);
}

}  // namespace

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model),
      ctx_(config.ctx > 0 ? config.ctx : model.config().ctx_len),
      pool_(config.n_threads),
      cache_(model.kv_shape(), default_blocks(config, ctx_)),
      scheduler_(config.scheduler),
      logits_(static_cast<size_t>(std::max(1, config.scheduler.max_seqs)) *
              static_cast<size_t>(model.config().n_vocab)) {}

Result<int64_t> Engine::submit(std::vector<int32_t> prompt, const RequestParams& params,
                               TokenCallback on_token) {
  if (prompt.empty()) return err("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) > ctx_)
    return err("the prompt has ", prompt.size(), " tokens, more than the context of ", ctx_,
               " tokens");
  for (int32_t t : prompt)
    if (t < 0 || t >= model_.config().n_vocab)
      return err("token id ", t, " is out of range (vocabulary has ", model_.config().n_vocab, ")");
  const int64_t id = next_id_++;
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), params, std::move(on_token));
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
  const int64_t id = seq->id;
  TokenEvent ev;
  ev.request_id = id;
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

void Engine::on_sampled(Sequence* seq, int32_t token) {
  seq->tokens.push_back(token);
  const double t = seq->seconds_since_submit();
  if (seq->timings.first_token < 0) seq->timings.first_token = t;
  seq->timings.token_times.push_back(t);
  seq->timings.n_generated = seq->n_generated();

  FinishReason reason = FinishReason::kNone;
  if (!seq->params.ignore_eos && model_.tokenizer().is_end_of_generation(token))
    reason = FinishReason::kStop;
  else if (seq->n_generated() >= seq->params.max_tokens)
    reason = FinishReason::kLength;
  else if (seq->size() >= ctx_)
    reason = FinishReason::kContext;

  TokenEvent ev;
  ev.request_id = seq->id;
  ev.token = token;
  ev.timings = &seq->timings;
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

  for (const ScheduledChunk& c : chunks) c.seq->n_computed += c.n_tokens;
  const int32_t n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < sampled.size(); ++i) {
    Sequence* seq = sampled[i];
    float* row = logits_.data() + i * static_cast<size_t>(n_vocab);
    on_sampled(seq, seq->sampler.sample(row, n_vocab, seq->tokens));
  }
  return {};
}

Status Engine::run_until_idle() {
  while (!idle()) DUET_TRY(step());
  return {};
}

}  // namespace duet
