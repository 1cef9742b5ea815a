#include "engine/model_runner.h"

#include <algorithm>

namespace duet {

ModelRunner::ModelRunner(Model& model, KvCache& cache, ThreadPool& pool)
    : model_(model), cache_(cache), pool_(pool) {}

Result<ModelOutput> ModelRunner::execute(const SchedulerOutput& plan) {
  ModelOutput out;
  out.n_vocab = model_.config().n_vocab;
  batch_.clear();
  size_t n_rows = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* seq = c.seq;
    const int32_t s = batch_.add_sequence(&seq->table);
    const int32_t n_logits = c.n_logits();
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      const int32_t index = seq->n_computed + j;
      batch_.add(seq->tokens[static_cast<size_t>(index)], index - seq->n_evicted, s,
                 j >= c.n_tokens - n_logits);
    }
    if (n_logits == 0) continue;
    out.sequences.push_back({seq, n_rows, n_logits});
    n_rows += static_cast<size_t>(n_logits);
  }
  batch_.copies = plan.copies;
  const size_t n_vocab = static_cast<size_t>(out.n_vocab);
  const size_t need = std::max<size_t>(1, n_rows + plan.forks.size()) * n_vocab;
  if (logits_.size() < need) logits_.resize(need);
  DUET_TRY(model_.forward(batch_, cache_, pool_, logits_.data()));
  out.logits = logits_.data();
  // A forked choice samples from its own copy of its parent's row: sampling
  // changes a row in place.
  for (const SchedulerOutput::Fork& f : plan.forks) {
    const auto parent = std::find_if(out.sequences.begin(), out.sequences.end(),
                                     [&](const SequenceLogits& s) { return s.seq == f.parent; });
    const float* row = out.row(parent->first_row + static_cast<size_t>(parent->n_rows - 1));
    std::copy(row, row + n_vocab, out.row(n_rows));
    out.sequences.push_back({f.child, n_rows, 1});
    ++n_rows;
  }
  return out;
}

}  // namespace duet
