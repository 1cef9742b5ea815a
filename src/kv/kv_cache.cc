#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <new>

namespace duet {

KvCache::KvCache(const KvShape& shape, int32_t n_blocks, KvType type)
    : shape_(shape),
      type_(type),
      row_bytes_(kv_row_bytes(type, shape.head_dim)),
      row_scales_(kv_row_scales(type, shape.head_dim)),
      head_block_bytes_(kv_row_total_bytes(type, shape.head_dim) * kBlockTokens),
      pool_(n_blocks),
      data_(allocate(static_cast<size_t>(shape.n_layers) * n_blocks * block_stride())) {
  assert(type != KvType::Q4 || shape.head_dim % 2 == 0);
}

// Huge pages: attention reads one head's rows of each block, a block stride
// apart (256 KiB at Llama-2-7B's shape in f16), so with 4 KiB pages every
// head block was a TLB miss. The pages are taken as blocks are first
// written, not all at start.
HugeBuffer KvCache::allocate(size_t bytes) {
  auto b = HugeBuffer::allocate(bytes, "the KV cache");
  if (!b.ok()) throw std::bad_alloc();  // as the std::vector it replaces would
  return std::move(*b);
}

size_t KvCache::bytes_per_token(const KvShape& shape, KvType type) {
  return static_cast<size_t>(shape.n_layers) * shape.planes() * shape.n_kv_heads *
         kv_row_total_bytes(type, shape.head_dim);
}

int32_t KvCache::blocks_for_bytes(const KvShape& shape, KvType type, size_t bytes) {
  const size_t per_block = std::max<size_t>(1, bytes_per_token(shape, type) * kBlockTokens);
  // Block ids are int32: a budget beyond that many blocks is capped, not wrapped.
  const size_t max_blocks = static_cast<size_t>(std::numeric_limits<int32_t>::max());
  return static_cast<int32_t>(std::clamp<size_t>(bytes / per_block, 1, max_blocks));
}

void KvCache::store_row(size_t head_block, int32_t slot, const float* x) {
  uint8_t* base = data_.data() + head_block;
  auto* scales = reinterpret_cast<uint16_t*>(base + scales_offset()) + slot * row_scales_;
  kv_quantize_row(type_, x, shape_.head_dim, base + slot * row_bytes_, scales);
}

void KvCache::load_row(size_t head_block, int32_t slot, float* out) const {
  const uint8_t* base = data_.data() + head_block;
  const auto* scales = reinterpret_cast<const uint16_t*>(base + scales_offset()) + slot * row_scales_;
  kv_dequantize_row(type_, base + slot * row_bytes_, scales, shape_.head_dim, out);
}

void KvCache::store(int32_t layer, int32_t block, int32_t slot, const float* k, const float* v) {
  const size_t hd = static_cast<size_t>(shape_.head_dim);
  for (int32_t h = 0; h < shape_.n_kv_heads; ++h) {
    store_row(offset(layer, block, h, 0), slot, k + h * hd);
    if (!shape_.keys_only) store_row(offset(layer, block, h, 1), slot, v + h * hd);
  }
}

void KvCache::copy_block(const BlockCopy& c) {
  for (int32_t layer = 0; layer < shape_.n_layers; ++layer)
    std::memcpy(data_.data() + offset(layer, c.dst, 0, 0), data_.data() + offset(layer, c.src, 0, 0), block_stride());
}

void KvCache::load_key(int32_t layer, int32_t block, int32_t kv_head, int32_t slot,
                       float* out) const {
  load_row(offset(layer, block, kv_head, 0), slot, out);
}

void KvCache::load_value(int32_t layer, int32_t block, int32_t kv_head, int32_t slot,
                         float* out) const {
  load_row(offset(layer, block, kv_head, shape_.keys_only ? 0 : 1), slot, out);
}

}  // namespace duet
