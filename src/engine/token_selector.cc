#include "engine/token_selector.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "grammar/token_mask.h"

namespace duet {

namespace {

// Sequences that only draw (no drafts to verify, no raw row to keep before
// penalties alter it) can draw all at once on the pool.
bool draws_plainly(const Sequence* seq) { return seq->spec.n_draft == 0 && seq->params.logprobs < 0; }

// Adds the time of a scope to a sequence's grammar_seconds.
class GrammarTimer {
 public:
  explicit GrammarTimer(Sequence* seq) : seq_(seq), start_(std::chrono::steady_clock::now()) {}
  ~GrammarTimer() {
    seq_->timings.grammar_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  GrammarTimer(const GrammarTimer&) = delete;
  GrammarTimer& operator=(const GrammarTimer&) = delete;

 private:
  Sequence* seq_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

// Each sequence samples from its own row with its own sampler, so drawing in
// parallel changes no result; with 16 streams a vocabulary-wide pass per
// sequence on one thread was a tenth of a step.
void TokenSelector::presample(const ModelOutput& out, ThreadPool& threads) {
  presampled_.assign(out.sequences.size(), -1);
  threads.parallel_for(static_cast<int64_t>(out.sequences.size()), 1, [&](int64_t e0, int64_t e1) {
    for (auto e = static_cast<size_t>(e0); e < static_cast<size_t>(e1); ++e) {
      Sequence* seq = out.sequences[e].seq;
      if (!draws_plainly(seq)) continue;
      float* row = out.row(out.sequences[e].first_row);
      // Each sequence's matcher has its own frames and mask cache, so
      // masks too are computed in parallel.
      presampled_[e] = seq->grammar ? sample_constrained(seq, row, out.n_vocab)
                                     : seq->sampler.sample(row, out.n_vocab, seq->tokens);
    }
  });
}

const std::vector<ChosenToken>& TokenSelector::select(const ModelOutput& out, Speculator* speculator,
                                                      BlockPool& blocks, ThreadPool& threads) {
  chosen_.clear();
  raw_rows_.clear();
  presample(out, threads);
  const auto n_vocab = static_cast<size_t>(out.n_vocab);
  for (size_t e = 0; e < out.sequences.size(); ++e) {
    Sequence* seq = out.sequences[e].seq;
    float* row = out.row(out.sequences[e].first_row);
    ++seq->timings.n_passes;
    const bool want_raw = seq->params.logprobs >= 0;
    const auto raw_start = static_cast<int64_t>(raw_rows_.size());
    new_tokens_.clear();
    if (seq->spec.n_draft > 0) {
      if (seq->grammar) constrain_drafts(seq, row, out.n_vocab);
      const Speculator::Outcome o = speculator->verify(seq, out.n_vocab, row, blocks, new_tokens_, raw_rows_);
      spec_counts_.drafted += o.n_draft;
      spec_counts_.accepted += o.n_accepted;
      ++spec_counts_.passes;
      if (seq->grammar)
        for (size_t i = 0; i < new_tokens_.size(); ++i)
          advance_grammar(seq, new_tokens_[i], seq->size() - static_cast<int32_t>(new_tokens_.size() - i - 1));
    } else {
      if (want_raw) raw_rows_.insert(raw_rows_.end(), row, row + n_vocab);
      int32_t drawn = presampled_[e];
      if (drawn < 0)
        drawn = seq->grammar ? sample_constrained(seq, row, out.n_vocab)
                             : seq->sampler.sample(row, out.n_vocab, seq->tokens);
      new_tokens_.push_back(drawn);
      seq->tokens.push_back(drawn);
      if (seq->grammar) advance_grammar(seq, drawn, seq->size());
    }
    for (size_t i = 0; i < new_tokens_.size(); ++i)
      chosen_.push_back({seq, seq->id, new_tokens_[i],
                         want_raw ? raw_start + static_cast<int64_t>(i * n_vocab) : -1});
  }
  return chosen_;
}

void TokenSelector::constrain_drafts(Sequence* seq, float* rows, int32_t n_vocab) const {
  // Row j follows the j drafts before it: mask it with the grammar there.
  const GrammarTimer timer(seq);
  GrammarMatcher m = *seq->grammar;
  const int32_t base = seq->size() - seq->spec.n_draft;
  for (int32_t j = 0; j <= seq->spec.n_draft; ++j) {
    constrain(m, rows + static_cast<size_t>(j) * static_cast<size_t>(n_vocab), n_vocab);
    if (j < seq->spec.n_draft) m.accept_bytes(trie_->token_bytes(seq->tokens[static_cast<size_t>(base + j)]));
  }
}

void TokenSelector::constrain(Sequence* seq, float* row, int32_t n_vocab) const {
  const GrammarTimer timer(seq);
  constrain(*seq->grammar, row, n_vocab);
}

void TokenSelector::constrain(const GrammarMatcher& matcher, float* row, int32_t n_vocab) const {
  const std::shared_ptr<const TokenMask> mask = token_mask(matcher, *trie_);
  const bool any = apply_token_mask(*mask, trie_->n_vocab(), row, n_vocab);
  // Nothing in the vocabulary can continue (a byte no token spells): end
  // rather than write text outside the grammar.
  if (!any)
    for (int32_t id : trie_->end_tokens())
      if (id >= 0 && id < n_vocab) row[id] = 0.0f;
}

int32_t TokenSelector::sample_constrained(Sequence* seq, float* row, int32_t n_vocab) const {
  constrain(seq, row, n_vocab);
  const int32_t t = seq->sampler.sample(row, n_vocab, seq->tokens);
  if (row[t] != -INFINITY) return t;
  // The sampler's last-resort pick after rounding can land on a masked
  // token; the likeliest allowed one is the honest replacement.
  return static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
}

void TokenSelector::advance_grammar(Sequence* seq, int32_t token, int32_t size_after) const {
  const GrammarTimer timer(seq);
  const auto& ends = trie_->end_tokens();
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) return;
  if (token >= 0 && token < trie_->n_vocab()) seq->grammar->accept_bytes(trie_->token_bytes(token));
  if (seq->grammar_end < 0 && seq->grammar->is_complete()) seq->grammar_end = size_after;
}

}  // namespace duet
