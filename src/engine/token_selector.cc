#include "engine/token_selector.h"

namespace duet {

namespace {

// Sequences that only draw (no drafts to verify, no raw row to keep before
// penalties alter it) can draw all at once on the pool.
bool draws_plainly(const Sequence* seq) { return seq->spec.n_draft == 0 && seq->params.logprobs < 0; }

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
      presampled_[e] = seq->sampler.sample(out.row(out.sequences[e].first_row), out.n_vocab, seq->tokens);
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
      const Speculator::Outcome o = speculator->verify(seq, out.n_vocab, row, blocks, new_tokens_, raw_rows_);
      spec_counts_.drafted += o.n_draft;
      spec_counts_.accepted += o.n_accepted;
      ++spec_counts_.passes;
    } else {
      if (want_raw) raw_rows_.insert(raw_rows_.end(), row, row + n_vocab);
      const int32_t drawn = presampled_[e];
      new_tokens_.push_back(drawn >= 0 ? drawn : seq->sampler.sample(row, out.n_vocab, seq->tokens));
      seq->tokens.push_back(new_tokens_.back());
    }
    for (size_t i = 0; i < new_tokens_.size(); ++i)
      chosen_.push_back({seq, seq->id, new_tokens_[i],
                         want_raw ? raw_start + static_cast<int64_t>(i * n_vocab) : -1});
  }
  return chosen_;
}

}  // namespace duet
