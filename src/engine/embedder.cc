#include "engine/embedder.h"

#include <algorithm>
#include <memory>

namespace duet {

Embedder::Embedder(Model& model, KvCache& cache, ThreadPool& pool, int32_t max_batch_tokens)
    : model_(model), cache_(cache), pool_(pool), max_batch_tokens_(std::max(1, max_batch_tokens)) {}

Result<std::unique_ptr<EmbeddingJob>> Embedder::start(std::vector<std::vector<int32_t>> inputs, Pooling pooling) {
  DUET_TRY(check_pooling(pooling));
  return std::make_unique<EmbeddingJob>(std::move(inputs), pooling, model_.config().dim, cache_.pool());
}

std::vector<Embedder::Span> Embedder::plan_pass(EmbeddingJob& job) {
  // Which inputs run, and how far: part-run ones first, then the next
  // inputs in order while their blocks are free. All are started before
  // the batch points at their tables, which starting moves.
  std::vector<Span> spans;
  int32_t budget = max_batch_tokens_;
  for (size_t k = 0; budget > 0; ++k) {
    if (k == job.open().size() && !(job.has_next() && job.start_next())) break;
    const EmbeddingJob::Open& in = job.open()[k];
    const int32_t n = std::min(static_cast<int32_t>(job.inputs()[in.index].size()) - in.n_done, budget);
    spans.push_back({k, in.n_done, n});
    budget -= n;
  }
  batch_.clear();
  for (const Span& sp : spans) {
    EmbeddingJob::Open& in = job.open()[sp.open];
    const std::vector<int32_t>& tokens = job.inputs()[in.index];
    const int32_t s = batch_.add_sequence(&in.table);
    for (int32_t p = sp.first; p < sp.first + sp.n; ++p)
      batch_.add(tokens[static_cast<size_t>(p)], p, s, job.wanted(in.index, p));
  }
  return spans;
}

Result<int32_t> Embedder::run_pass(EmbeddingJob& job) {
  const std::vector<Span> spans = plan_pass(job);
  if (spans.empty()) {
    if (job.done()) return 0;
    Error e = err("the KV cache has no room now for an input of ", job.next_input().size(), " tokens; retry later");
    e.code = kCacheFull;
    return e;
  }
  const auto dim = static_cast<size_t>(model_.config().dim);
  hidden_.resize(std::max(1, batch_.n_logits()) * dim);
  DUET_TRY(model_.hidden_states(batch_, cache_, pool_, hidden_.data()));
  const float* row = hidden_.data();
  int32_t n_run = 0;
  for (const Span& sp : spans) {
    EmbeddingJob::Open& in = job.open()[sp.open];
    for (int32_t p = sp.first; p < sp.first + sp.n; ++p) {
      if (!job.wanted(in.index, p)) continue;
      job.add(in.index, row);
      row += dim;
    }
    in.n_done += sp.n;
    n_run += sp.n;
  }
  job.close_finished();
  return n_run;
}

}  // namespace duet
