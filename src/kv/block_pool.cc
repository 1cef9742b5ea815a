#include "kv/block_pool.h"

#include <cassert>

namespace duet {

BlockPool::BlockPool(int32_t n_blocks) : refcount_(static_cast<size_t>(n_blocks), 0) {
  free_.reserve(static_cast<size_t>(n_blocks));
  // Hand out low ids first: the stack pops from the back.
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::retain(int32_t block) {
  assert(refcount_[static_cast<size_t>(block)] > 0);
  ++refcount_[static_cast<size_t>(block)];
}

void BlockPool::release(int32_t block) {
  int32_t& rc = refcount_[static_cast<size_t>(block)];
  assert(rc > 0);
  if (--rc == 0) free_.push_back(block);
}

}  // namespace duet
