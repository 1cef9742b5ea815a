// The paged KV cache: storage for K and V of every layer in fixed blocks of
// kBlockTokens tokens, plus the pool that hands blocks out. Attention reads
// K/V only through a sequence's BlockTable. Elements are stored in one of the
// KvType formats (core/kv_format.h); store() quantizes and load_key() /
// load_value() dequantize, so callers never see the storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/huge_buffer.h"
#include "core/kv_format.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/kv_groups.h"

namespace duet {

struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  // Keys only: V is not stored and value_data() aliases key_data(). For
  // multi-head latent attention (DeepSeek-V2), whose one cached row per
  // token, [c_kv | k_pe], serves as the key and (its leading dims) as the value.
  bool keys_only = false;
  // [n_layers] how many tokens back each layer attends (0: all), or empty
  // (0 for every layer): layers of different windows keep separate block
  // tables (kv/kv_groups.h).
  std::vector<int32_t> layer_window = {};
  // K and V per token per layer (1 when keys_only, else 2).
  int32_t planes() const { return keys_only ? 1 : 2; }
  // Lists of blocks each sequence's table holds (kv/kv_groups.h).
  int32_t n_groups() const { return KvGroups::of(n_layers, layer_window).n_groups(); }
};

// `s` with every layer in one block table (one group): a window stays only
// where every layer has the same one. For caches whose tables must treat
// every layer alike (a StreamingLLM window moves all their positions) or
// that are sized as one table per sequence.
KvShape with_one_table(KvShape s);

class KvCache {
 public:
  KvCache(const KvShape& shape, int32_t n_blocks, KvType type = KvType::F32);

  // How many blocks of this shape and type fit in `bytes` (at least 1, at
  // most INT32_MAX).
  static int32_t blocks_for_bytes(const KvShape& shape, KvType type, size_t bytes);
  // Bytes of K and V (K alone when keys_only) for one token across all
  // layers and KV heads.
  static size_t bytes_per_token(const KvShape& shape, KvType type);
  // Bytes of one block: kBlockTokens tokens of one group's layers.
  static size_t bytes_per_block(const KvShape& shape, KvType type);

  const KvShape& shape() const { return shape_; }
  const KvGroups& groups() const { return groups_; }
  // The blocks of `table` that hold `layer`'s K/V.
  const std::vector<int32_t>& blocks_of(const BlockTable& table, int32_t layer) const {
    return table.blocks(groups_.group[static_cast<size_t>(layer)]);
  }
  KvType type() const { return type_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // Writes one token's K and V (each [n_kv_heads * head_dim] floats) into
  // `slot` of `block` for `layer`, in the cache's format (v is ignored,
  // and may be null, for a keys-only cache).
  void store(int32_t layer, int32_t block, int32_t slot, const float* k, const float* v);
  // Writes one token's K (or V) row of one KV head (x[head_dim]), e.g. a key
  // loaded with load_key() and rotated to a new position.
  void store_key(int32_t layer, int32_t block, int32_t kv_head, int32_t slot, const float* x) {
    store_row(offset(layer, block, kv_head, 0), slot, x);
  }
  void store_value(int32_t layer, int32_t block, int32_t kv_head, int32_t slot, const float* x) {
    store_row(offset(layer, block, kv_head, shape_.keys_only ? 0 : 1), slot, x);
  }
  // Copies the K and V of every layer slot of block `src` into block `dst`.
  void copy_block(const BlockCopy& c);
  // One token's K (or V) row of one KV head, decoded to out[head_dim].
  void load_key(int32_t layer, int32_t block, int32_t kv_head, int32_t slot, float* out) const;
  void load_value(int32_t layer, int32_t block, int32_t kv_head, int32_t slot, float* out) const;

  // The raw storage, for the attention kernel. A head block is K (or V) of
  // one KV head in one block of one layer:
  //   [kBlockTokens][row bytes]  elements, token after token
  //   [kBlockTokens][n scales]   fp16 scales (q8, q4 only), at scales_offset()
  // Per-head contiguity lets attention stream one head's keys linearly.
  const uint8_t* key_data(int32_t layer, int32_t block, int32_t kv_head) const {
    return data_.data() + offset(layer, block, kv_head, 0);
  }
  const uint8_t* value_data(int32_t layer, int32_t block, int32_t kv_head) const {
    return data_.data() + offset(layer, block, kv_head, shape_.keys_only ? 0 : 1);
  }
  // Bytes from a block's K (or V) of one layer and head to the next block's.
  size_t block_stride() const { return head_block_bytes_ * shape_.n_kv_heads * shape_.planes(); }
  // Bytes from one KV head's head block to the next head's (same block, layer and plane).
  size_t head_stride() const { return head_block_bytes_; }
  // Bytes from a head block's start to its scales.
  size_t scales_offset() const { return row_bytes_ * kBlockTokens; }

  size_t bytes_per_token() const { return bytes_per_token(shape_, type_); }
  size_t bytes_per_block() const { return bytes_per_block(shape_, type_); }
  size_t bytes_total() const { return data_.size(); }

 private:
  // A layer's K/V sit in its slot of each block of its group.
  size_t offset(int32_t layer, int32_t block, int32_t kv_head, int kv) const {
    const auto slot = static_cast<size_t>(groups_.slot[static_cast<size_t>(layer)]);
    return (slot * pool_.n_blocks() + block) * block_stride() +
           (static_cast<size_t>(kv) * shape_.n_kv_heads + kv_head) * head_block_bytes_;
  }
  void store_row(size_t head_block, int32_t slot, const float* x);
  void load_row(size_t head_block, int32_t slot, float* out) const;

  KvShape shape_;
  KvGroups groups_;
  KvType type_;
  size_t row_bytes_;         // one token's elements of one head
  int32_t row_scales_;       // one token's fp16 scales of one head
  size_t head_block_bytes_;  // kBlockTokens rows with their scales
  BlockPool pool_;
  static HugeBuffer allocate(size_t bytes);
  void touch_first_blocks();

  HugeBuffer data_;  // [layers_per_block][n_blocks][K,V (K only)][n_kv_heads] head blocks
};

}  // namespace duet
