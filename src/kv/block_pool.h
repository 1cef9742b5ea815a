// The pool of fixed-size KV blocks. Blocks are reference counted so that
// sequences can share prefix blocks; a block returns to the free list when
// its last holder releases it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace duet {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  // A free block with reference count 1, or nothing when the pool is empty.
  std::optional<int32_t> allocate();
  void retain(int32_t block);
  void release(int32_t block);

  int32_t n_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_used() const { return n_blocks() - n_free(); }
  int32_t refcount(int32_t block) const { return refcount_[static_cast<size_t>(block)]; }

 private:
  std::vector<int32_t> free_;      // stack of free block ids
  std::vector<int32_t> refcount_;  // [n_blocks]
};

}  // namespace duet
