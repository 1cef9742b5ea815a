#include "engine/embedder.h"

#include <algorithm>
#include <cmath>

namespace duet {

namespace {

// The rows pooling reads: every one for mean, only the first or the last
// otherwise, so cls and last norm one row per input.
bool wanted(Pooling pooling, int32_t position, int32_t n_tokens) {
  switch (pooling) {
    case Pooling::kCls: return position == 0;
    case Pooling::kLast: return position == n_tokens - 1;
    default: return true;
  }
}

void normalize(std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum <= 0) return;
  const auto inv = static_cast<float>(1.0 / std::sqrt(sum));
  for (float& x : v) x *= inv;
}

}  // namespace

Embedder::Embedder(Model& model, KvCache& cache, ThreadPool& pool, int32_t max_batch_tokens)
    : model_(model), cache_(cache), pool_(pool), max_batch_tokens_(std::max(1, max_batch_tokens)) {}

Result<Embeddings> Embedder::embed(const std::vector<std::vector<int32_t>>& inputs, Pooling pooling) {
  if (pooling != Pooling::kMean && pooling != Pooling::kCls && pooling != Pooling::kLast)
    return err("pooling '", pooling_name(pooling), "' gives no single vector per input (mean, cls and last do)");
  const auto dim = static_cast<size_t>(model_.config().dim);
  Embeddings out(inputs.size(), std::vector<float>(dim, 0.0f));
  // As many inputs at a time as the free blocks hold, and at least one.
  for (size_t next = 0; next < inputs.size();) {
    std::vector<Input> group;
    for (; next < inputs.size(); ++next) {
      Input in{next, {}, 0};
      if (!in.table.reserve(cache_.pool(), static_cast<int32_t>(inputs[next].size()))) break;
      group.push_back(std::move(in));
    }
    if (group.empty()) {
      Error e = err("the KV cache has no room now for an input of ", inputs[next].size(),
                    " tokens (running requests hold it); retry later");
      e.code = kCacheFull;
      return e;
    }
    const Status st = run_group(group, inputs, pooling, out);
    for (Input& in : group) in.table.release_all(cache_.pool());
    if (!st) return st.error();
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (pooling == Pooling::kMean)
      for (float& x : out[i]) x /= static_cast<float>(inputs[i].size());
    normalize(out[i]);
  }
  return out;
}

Status Embedder::run_group(std::vector<Input>& group, const std::vector<std::vector<int32_t>>& inputs,
                           Pooling pooling, Embeddings& out) {
  const auto dim = static_cast<size_t>(model_.config().dim);
  struct Span {
    Input* input;
    int32_t first, n;  // positions [first, first + n) of the input ran in this pass
  };
  for (;;) {
    batch_.clear();
    std::vector<Span> spans;
    int32_t budget = max_batch_tokens_;
    for (Input& in : group) {
      const std::vector<int32_t>& tokens = inputs[in.index];
      const auto n_tokens = static_cast<int32_t>(tokens.size());
      const int32_t n = std::min(n_tokens - in.n_done, budget);
      if (n <= 0) continue;
      const int32_t s = batch_.add_sequence(&in.table);
      for (int32_t p = in.n_done; p < in.n_done + n; ++p)
        batch_.add(tokens[static_cast<size_t>(p)], p, s, wanted(pooling, p, n_tokens));
      spans.push_back({&in, in.n_done, n});
      budget -= n;
      if (budget == 0) break;
    }
    if (spans.empty()) return {};
    hidden_.resize(std::max(1, batch_.n_logits()) * dim);
    DUET_TRY(model_.hidden_states(batch_, cache_, pool_, hidden_.data()));
    const float* row = hidden_.data();
    for (const Span& sp : spans) {
      const auto n_tokens = static_cast<int32_t>(inputs[sp.input->index].size());
      std::vector<float>& v = out[sp.input->index];
      for (int32_t p = sp.first; p < sp.first + sp.n; ++p) {
        if (!wanted(pooling, p, n_tokens)) continue;
        for (size_t j = 0; j < dim; ++j) v[j] += row[j];
        row += dim;
      }
      sp.input->n_done += sp.n;
    }
  }
}

}  // namespace duet
