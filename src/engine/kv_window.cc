#include "engine/kv_window.h"

#include <algorithm>

namespace duet {

int32_t KvWindow::slide(Sequence* seq, KvCache& cache, Model& model, ThreadPool& pool) const {
  const int32_t len = seq->cache_len();
  if (window_ <= 0) {
    if (model_window_ > 0 && len > model_window_)
      seq->table.release_front(cache.pool(), (len - model_window_) / kBlockTokens);
    return 0;
  }
  const int32_t sink_tokens = blocks_for_tokens(sinks_) * kBlockTokens;
  const int32_t n = std::max(0, len - sink_tokens - window_) / kBlockTokens;
  if (n == 0) return 0;
  // Whole blocks after the sinks go; the keys after them move down, so the
  // model never sees a position past sinks + window + one step's tokens.
  seq->table.erase(cache.pool(), sink_tokens / kBlockTokens, n);
  seq->n_evicted += n * kBlockTokens;
  model.shift_keys(cache, seq->table, sink_tokens, len - n * kBlockTokens, -n * kBlockTokens, pool);
  return n * kBlockTokens;
}

}  // namespace duet
