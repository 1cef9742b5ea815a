#include "engine/speculative.h"

#include <algorithm>
#include <cmath>

#include "kv/kv_cache.h"
#include "model/batch.h"

namespace duet {

Verdict accept_or_resample(const TokenDist& p, const TokenDist& q, int32_t d, Sampler& rng,
                           TokenDist& residual) {
  const double pd = prob_of(p, d);
  const double qd = q.empty() ? 1.0 : prob_of(q, d);
  // A ratio of at least 1 accepts without a draw, so greedy spends no randomness.
  if (pd > 0.0 && (pd >= qd || rng.uniform() * qd < pd)) return {true, d};
  residual.clear();
  double mass = 0.0;
  for (const TokenProb& t : p) {
    const double r = t.p - (q.empty() ? (t.id == d ? 1.0 : 0.0) : prob_of(q, t.id));
    if (r > 0.0) {
      residual.push_back({t.id, r});
      mass += r;
    }
  }
  // p == q up to rounding: the residual is empty and p itself is the answer.
  if (mass <= 0.0) return {false, rng.draw(p)};
  for (TokenProb& t : residual) t.p /= mass;
  return {false, rng.draw(residual)};
}

int32_t adaptive_draft_len(double accept_rate, int32_t draft_max) {
  const double a = std::clamp(accept_rate, 0.05, 0.99);
  const auto k = static_cast<int32_t>(std::floor(std::log(0.25) / std::log(a)));
  return std::clamp(k, 1, draft_max);
}

std::vector<int32_t> lookup_continuation(std::span<const int32_t> tokens, int32_t max_ngram,
                                         int32_t k) {
  const auto len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_ngram, len - 1); n >= 1; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest match first: recent text predicts the next tokens best.
    for (int64_t end = len - 1; end >= n; --end) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + (end - n))) continue;
      const int64_t stop = std::min(len, end + k);
      return {tokens.begin() + end, tokens.begin() + stop};
    }
  }
  return {};
}

namespace {

class LookupDrafter final : public Drafter {
 public:
  explicit LookupDrafter(int32_t max_ngram) : max_ngram_(max_ngram) {}

  Status propose(std::span<Sequence* const> seqs, ThreadPool&) override {
    for (Sequence* seq : seqs) {
      const std::vector<int32_t> next = lookup_continuation(seq->tokens, max_ngram_, seq->spec.k);
      seq->spec.n_draft = static_cast<int32_t>(next.size());
      seq->spec.q.assign(next.size(), TokenDist{});
      seq->tokens.insert(seq->tokens.end(), next.begin(), next.end());
    }
    return {};
  }

 private:
  int32_t max_ngram_;
};

class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(Model& draft, int32_t ctx, int32_t max_seqs, int32_t draft_max)
      : draft_(draft),
        cache_(with_one_table(draft.kv_shape()), blocks_for_tokens(ctx + draft_max) * std::max(1, max_seqs)) {}

  Status propose(std::span<Sequence* const> seqs, ThreadPool& pool) override;

  void keep(Sequence* seq, int32_t n) override {
    SpecState& s = seq->spec;
    s.draft_computed = std::min(s.draft_computed, n);
    s.draft_table.truncate(cache_.pool(), s.draft_computed);
  }

  void release(Sequence* seq) override {
    seq->spec.draft_table.release_all(cache_.pool());
    seq->spec.draft_computed = 0;
  }

  const BlockPool* block_pool() const override { return &cache_.pool(); }

 private:
  static constexpr int32_t kMaxRows = 512;  // rows per draft forward pass

  Status catch_up(std::span<Sequence* const> seqs, ThreadPool& pool);
  Status run(ThreadPool& pool);
  void draw_next(Sequence* seq, float* logits);

  Model& draft_;
  KvCache cache_;
  Batch batch_;
  std::vector<Sequence*> rows_seq_;  // sequence of each logits row of batch_
  std::vector<float> logits_;
};

Status ModelDrafter::run(ThreadPool& pool) {
  const auto n_vocab = static_cast<size_t>(draft_.config().n_vocab);
  logits_.resize(std::max<size_t>(1, static_cast<size_t>(batch_.n_logits())) * n_vocab);
  DUET_TRY(draft_.forward(batch_, cache_, pool, logits_.data()));
  for (size_t i = 0; i < rows_seq_.size(); ++i) draw_next(rows_seq_[i], logits_.data() + i * n_vocab);
  batch_.clear();
  rows_seq_.clear();
  return {};
}

void ModelDrafter::draw_next(Sequence* seq, float* logits) {
  SpecState& s = seq->spec;
  if (!s.draft_sampler) s.draft_sampler.emplace(seq->params.sampling);
  TokenDist q;
  s.draft_sampler->distribution(logits, draft_.config().n_vocab, seq->tokens, q);
  // The target's RNG draws the draft token: one seeded stream per request.
  const int32_t d = seq->sampler.draw(q);
  // A greedy draft is deterministic; its one-point q is implied.
  if (q.size() == 1) q.clear();
  s.q.push_back(std::move(q));
  seq->tokens.push_back(d);
  ++s.n_draft;
}

// Brings every sequence's draft cache up to its last token and draws the
// first draft token from the logits there.
Status ModelDrafter::catch_up(std::span<Sequence* const> seqs, ThreadPool& pool) {
  for (Sequence* seq : seqs) {
    SpecState& s = seq->spec;
    int32_t seq_index = -1;
    for (int32_t pos = s.draft_computed; pos < seq->size(); ++pos) {
      if (batch_.size() == kMaxRows) {
        DUET_TRY(run(pool));
        seq_index = -1;
      }
      if (seq_index < 0) seq_index = batch_.add_sequence(&s.draft_table);
      const bool last = pos == seq->size() - 1;
      batch_.add(seq->tokens[static_cast<size_t>(pos)], pos, seq_index, last);
      if (last) rows_seq_.push_back(seq);
    }
    s.draft_computed = seq->size();
  }
  if (batch_.size() > 0) DUET_TRY(run(pool));
  return {};
}

Status ModelDrafter::propose(std::span<Sequence* const> seqs, ThreadPool& pool) {
  std::vector<Sequence*> active;
  for (Sequence* seq : seqs) {
    SpecState& s = seq->spec;
    s.n_draft = 0;
    s.q.clear();
    // Room for the pending token and all but the last draft token.
    if (s.k > 0 && s.draft_table.reserve(cache_.pool(), seq->size() + s.k - 1))
      active.push_back(seq);
  }
  batch_.clear();
  rows_seq_.clear();
  DUET_TRY(catch_up(active, pool));
  for (;;) {
    for (Sequence* seq : active) {
      if (seq->spec.n_draft >= seq->spec.k) continue;
      const int32_t s = batch_.add_sequence(&seq->spec.draft_table);
      const int32_t pos = seq->size() - 1;
      batch_.add(seq->tokens.back(), pos, s, true);
      rows_seq_.push_back(seq);
      seq->spec.draft_computed = seq->size();
    }
    if (batch_.size() == 0) break;
    DUET_TRY(run(pool));
  }
  return {};
}

}  // namespace

void Speculator::cut_drafts(Sequence* seq, int32_t n) {
  SpecState& s = seq->spec;
  if (s.n_draft <= n) return;
  seq->tokens.resize(seq->tokens.size() - static_cast<size_t>(s.n_draft - n));
  s.q.resize(static_cast<size_t>(n));
  s.n_draft = n;
  drafter_->keep(seq, seq->size());
}

void Speculator::trim(const SchedulerOutput& plan) {
  for (Sequence* seq : drafted_) {
    int32_t allowed = 0;  // 0 when the sequence was not scheduled at all
    for (const ScheduledChunk& c : plan.chunks)
      if (c.seq == seq) allowed = c.n_draft;
    cut_drafts(seq, allowed);
  }
}

void Speculator::keep_grammatical_drafts(Sequence* seq) {
  if (!trie_) {
    cut_drafts(seq, 0);
    return;
  }
  GrammarMatcher m = *seq->grammar;
  const int32_t base = seq->size() - seq->spec.n_draft;
  const auto& ends = trie_->end_tokens();
  int32_t ok = 0;
  for (; ok < seq->spec.n_draft; ++ok) {
    const int32_t d = seq->tokens[static_cast<size_t>(base + ok)];
    if (d < 0 || d >= trie_->n_vocab() || std::find(ends.begin(), ends.end(), d) != ends.end()) break;
    const std::string& bytes = trie_->token_bytes(d);
    if (bytes.empty() || !m.accept_bytes(bytes)) break;
  }
  cut_drafts(seq, ok);
}

Speculator::Outcome Speculator::verify(Sequence* seq, int32_t n_vocab, float* rows, BlockPool& pool,
                                       std::vector<int32_t>& out, std::vector<float>& raw) {
  SpecState& s = seq->spec;
  const int32_t base = seq->size() - s.n_draft;
  const std::span<const int32_t> tokens(seq->tokens);
  int32_t accepted = 0;
  for (int32_t j = 0; j <= s.n_draft; ++j) {
    float* row = rows + static_cast<size_t>(j) * static_cast<size_t>(n_vocab);
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
  const Outcome outcome{s.n_draft, accepted};
  seq->timings.n_drafted += s.n_draft;
  seq->timings.n_accepted += accepted;

  seq->tokens.resize(static_cast<size_t>(base + accepted));
  seq->tokens.push_back(out.back());
  // The rejected drafts' K/V stay in their slots, to be overwritten: rolling
  // back is only dropping whole blocks past the accepted tokens.
  seq->n_computed = base + accepted;
  seq->table.truncate(pool, seq->cache_len());
  drafter_->keep(seq, seq->n_computed);
  s.n_draft = 0;
  s.q.clear();
  return outcome;
}

std::unique_ptr<Drafter> make_lookup_drafter(int32_t max_ngram) {
  return std::make_unique<LookupDrafter>(max_ngram);
}

Result<std::unique_ptr<Drafter>> make_model_drafter(Model& draft, const Model& target,
                                                    int32_t ctx, int32_t max_seqs,
                                                    int32_t draft_max) {
  const Tokenizer& a = draft.tokenizer();
  const Tokenizer& b = target.tokenizer();
  if (draft.config().n_vocab != target.config().n_vocab || a.n_vocab() != b.n_vocab())
    return err("the draft model's vocabulary (", draft.config().n_vocab,
               " tokens) differs from the target's (", target.config().n_vocab, ")");
  for (int32_t id = 0; id < a.n_vocab(); ++id)
    if (a.token_text(id) != b.token_text(id))
      return err("the draft model's token ", id, " is '", a.token_text(id),
                 "' but the target's is '", b.token_text(id), "': the vocabularies differ");
  return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(draft, ctx, max_seqs, draft_max));
}

}  // namespace duet
