// Random K/V rows for the attention benchmarks: every slot of positions
// [0, n) of every layer, normal(0, 1), the same on every run.
#pragma once

#include <random>
#include <vector>

#include "kv/kv_cache.h"

namespace duet::bench {

inline void fill_kv(KvCache& cache, const BlockTable& table, int32_t n) {
  std::mt19937 gen(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const KvShape& s = cache.shape();
  std::vector<float> k(static_cast<size_t>(s.n_kv_heads) * s.head_dim), v(k.size());
  for (int32_t l = 0; l < s.n_layers; ++l)
    for (int32_t p = 0; p < n; ++p) {
      for (float& x : k) x = d(gen);
      for (float& x : v) x = d(gen);
      cache.store(l, table.blocks()[static_cast<size_t>(p / kBlockTokens)], p % kBlockTokens, k.data(), v.data());
    }
}

}  // namespace duet::bench
