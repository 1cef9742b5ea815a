#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <functional>
#include <limits>
#include <new>

namespace duet {

KvShape with_one_table(KvShape s) {
  if (std::adjacent_find(s.layer_window.begin(), s.layer_window.end(), std::not_equal_to<>()) != s.layer_window.end())
    s.layer_window.clear();
  return s;
}

KvCache::KvCache(const KvShape& shape, int32_t n_blocks, KvType type)
    : shape_(shape),
      groups_(KvGroups::of(shape.n_layers, shape.layer_window)),
      type_(type),
      row_bytes_(kv_row_bytes(type, shape.head_dim)),
      row_scales_(kv_row_scales(type, shape.head_dim)),
      head_block_bytes_(kv_row_total_bytes(type, shape.head_dim) * kBlockTokens),
      pool_(n_blocks, groups_.window),
      data_(allocate(static_cast<size_t>(groups_.layers_per_block) * n_blocks * block_stride())) {
  assert(type != KvType::Q4 || shape.head_dim % 2 == 0);
  assert(shape.layer_window.empty() || shape.layer_window.size() == static_cast<size_t>(shape.n_layers));
  touch_first_blocks();
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

// Each layer's blocks have a region of their own, so a first request's
// first block takes a fresh huge page per layer, which the kernel zeroes on
// first touch: in a first forward pass that was ~100-150 ms of a short
// prompt's TTFT at TinyLlama's shape on this VM. The pool hands out low ids
// first, so the first huge page of every region is taken now instead (22
// layers: 44 MiB the first requests would fill anyway); the rest still
// comes as blocks are first written.
void KvCache::touch_first_blocks() {
  const size_t region = static_cast<size_t>(pool_.n_blocks()) * block_stride();
  const size_t first = std::min(region, HugeBuffer::kPageBytes);
  for (int32_t s = 0; s < groups_.layers_per_block; ++s)
    for (size_t at = 0; at < first; at += 4096) data_.data()[static_cast<size_t>(s) * region + at] = 0;
}

size_t KvCache::bytes_per_token(const KvShape& shape, KvType type) {
  return static_cast<size_t>(shape.n_layers) * shape.planes() * shape.n_kv_heads *
         kv_row_total_bytes(type, shape.head_dim);
}

size_t KvCache::bytes_per_block(const KvShape& shape, KvType type) {
  const int32_t layers = KvGroups::of(shape.n_layers, shape.layer_window).layers_per_block;
  return static_cast<size_t>(layers) * shape.planes() * shape.n_kv_heads * kv_row_total_bytes(type, shape.head_dim) *
         kBlockTokens;
}

int32_t KvCache::blocks_for_bytes(const KvShape& shape, KvType type, size_t bytes) {
  const size_t per_block = std::max<size_t>(1, bytes_per_block(shape, type));
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
  for (size_t slot = 0; slot < static_cast<size_t>(groups_.layers_per_block); ++slot) {
    const size_t plane = slot * pool_.n_blocks();
    std::memcpy(data_.data() + (plane + c.dst) * block_stride(), data_.data() + (plane + c.src) * block_stride(),
                block_stride());
  }
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
