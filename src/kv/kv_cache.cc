#include "kv/kv_cache.h"

namespace duet {

KvCache::KvCache(const KvShape& shape, int32_t n_blocks)
    : shape_(shape),
      pool_(n_blocks),
      data_(static_cast<size_t>(shape.n_layers) * n_blocks * 2 * shape.n_kv_heads * kBlockTokens *
            shape.head_dim) {}

size_t KvCache::bytes_per_token() const {
  return static_cast<size_t>(shape_.n_layers) * 2 * shape_.n_kv_heads * shape_.head_dim *
         sizeof(float);
}

}  // namespace duet
