#include "engine/kv_window.h"

#include <algorithm>

namespace duet {

int32_t KvWindow::slide(Sequence* seq, KvCache& cache, Model& model, ThreadPool& pool) const {
  const int32_t len = seq->cache_len();
  if (window_ <= 0) {
    const KvGroups& groups = cache.groups();
    for (int32_t g = 0; g < seq->table.n_groups(); ++g) {
      const int32_t w = groups.window[static_cast<size_t>(g)];
      if (w > 0 && len > w) seq->table.release_front(cache.pool(), g, (len - w) / kBlockTokens);
    }
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
