// The paged KV cache: storage for K and V of every layer in fixed blocks of
// kBlockTokens tokens, plus the pool that hands blocks out. Attention reads
// K/V only through a sequence's BlockTable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace duet {

struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

class KvCache {
 public:
  KvCache(const KvShape& shape, int32_t n_blocks);

  const KvShape& shape() const { return shape_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // K (or V) of one KV head in one block of one layer: [kBlockTokens][head_dim].
  // Per-head contiguity lets attention stream one head's keys linearly.
  float* key(int32_t layer, int32_t block, int32_t kv_head) {
    return data_.data() + offset(layer, block, kv_head, 0);
  }
  float* value(int32_t layer, int32_t block, int32_t kv_head) {
    return data_.data() + offset(layer, block, kv_head, 1);
  }
  const float* key(int32_t layer, int32_t block, int32_t kv_head) const {
    return data_.data() + offset(layer, block, kv_head, 0);
  }
  const float* value(int32_t layer, int32_t block, int32_t kv_head) const {
    return data_.data() + offset(layer, block, kv_head, 1);
  }

  // Floats from a block's K (or V) of one layer and head to the next block's.
  size_t block_stride() const {
    return static_cast<size_t>(kBlockTokens) * shape_.head_dim * shape_.n_kv_heads * 2;
  }

  // Bytes of K and V for one token across all layers and KV heads.
  size_t bytes_per_token() const;
  size_t bytes_per_block() const { return bytes_per_token() * kBlockTokens; }
  size_t bytes_total() const { return data_.size() * sizeof(float); }

 private:
  size_t offset(int32_t layer, int32_t block, int32_t kv_head, int kv) const {
    const size_t head_elems = static_cast<size_t>(kBlockTokens) * shape_.head_dim;
    const size_t block_elems = head_elems * shape_.n_kv_heads * 2;
    return ((static_cast<size_t>(layer) * pool_.n_blocks() + block) * block_elems) +
           (static_cast<size_t>(kv) * shape_.n_kv_heads + kv_head) * head_elems;
  }

  KvShape shape_;
  BlockPool pool_;
  std::vector<float> data_;  // [n_layers][n_blocks][K,V][n_kv_heads][kBlockTokens][head_dim]
};

}  // namespace duet
