#include "kv/block_pool.h"

#include <cassert>
#include <utility>

namespace duet {

BlockPool::BlockPool(int32_t n_blocks, std::vector<int32_t> group_window)
    : group_window_(std::move(group_window)),
      refcount_(static_cast<size_t>(n_blocks), 0),
      hash_(static_cast<size_t>(n_blocks), 0),
      tagged_(static_cast<size_t>(n_blocks), 0) {
  lru_pos_.assign(static_cast<size_t>(n_blocks), lru_.end());
  free_.reserve(static_cast<size_t>(n_blocks));
  // Hand out low ids first: the stack pops from the back.
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    lru_pos_[static_cast<size_t>(b)] = lru_.end();
    forget_hash(b);
  } else {
    return std::nullopt;
  }
  refcount_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::retain(int32_t block) {
  const size_t i = static_cast<size_t>(block);
  if (refcount_[i] == 0) {
    assert(lru_pos_[i] != lru_.end());  // only cached blocks come back from zero
    lru_.erase(lru_pos_[i]);
    lru_pos_[i] = lru_.end();
  }
  ++refcount_[i];
}

void BlockPool::release(int32_t block) {
  const size_t i = static_cast<size_t>(block);
  assert(refcount_[i] > 0);
  if (--refcount_[i] > 0) return;
  if (tagged_[i]) lru_pos_[i] = lru_.insert(lru_.end(), block);
  else free_.push_back(block);
}

bool BlockPool::set_hash(int32_t block, uint64_t hash) {
  const size_t i = static_cast<size_t>(block);
  assert(refcount_[i] > 0);
  if (tagged_[i] || by_hash_.count(hash)) return false;
  tagged_[i] = 1;
  hash_[i] = hash;
  by_hash_.emplace(hash, block);
  return true;
}

std::optional<int32_t> BlockPool::find(uint64_t hash) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::forget_hash(int32_t block) {
  const size_t i = static_cast<size_t>(block);
  if (!tagged_[i]) return;
  by_hash_.erase(hash_[i]);
  tagged_[i] = 0;
}

}  // namespace duet
