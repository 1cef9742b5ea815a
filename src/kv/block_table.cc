#include "kv/block_table.h"

#include <algorithm>

namespace duet {

bool BlockTable::reserve(BlockPool& pool, int32_t n_tokens) {
  const size_t need = static_cast<size_t>(blocks_for_tokens(n_tokens));
  if (need <= blocks.size()) return true;
  if (static_cast<size_t>(pool.n_free()) < need - blocks.size()) return false;
  while (blocks.size() < need) blocks.push_back(*pool.allocate());
  return true;
}

void BlockTable::truncate(BlockPool& pool, int32_t n_tokens) {
  const size_t keep = static_cast<size_t>(blocks_for_tokens(n_tokens));
  while (blocks.size() > keep) {
    if (blocks.back() != kNoBlock) pool.release(blocks.back());
    blocks.pop_back();
  }
}

void BlockTable::release_front(BlockPool& pool, int32_t n) {
  for (int32_t i = 0; i < n && i < static_cast<int32_t>(blocks.size()); ++i) {
    int32_t& b = blocks[static_cast<size_t>(i)];
    if (b != kNoBlock) pool.release(b);
    b = kNoBlock;
  }
}

BlockTable BlockTable::share(BlockPool& pool) const {
  for (int32_t b : blocks)
    if (b != kNoBlock) pool.retain(b);
  return *this;
}

bool BlockTable::own_blocks(BlockPool& pool, int32_t begin, int32_t end, std::vector<BlockCopy>& copies) {
  const size_t first = static_cast<size_t>(begin / kBlockTokens);
  const size_t last = std::min(blocks.size(), static_cast<size_t>(blocks_for_tokens(end)));
  const auto shared = [&](size_t k) { return blocks[k] != kNoBlock && pool.refcount(blocks[k]) > 1; };
  int32_t n_shared = 0;
  for (size_t k = first; k < last; ++k) n_shared += shared(k);
  if (n_shared > pool.n_free()) return false;
  for (size_t k = first; k < last; ++k) {
    if (!shared(k)) continue;
    const int32_t fresh = *pool.allocate();
    copies.push_back({blocks[k], fresh});
    pool.release(blocks[k]);
    blocks[k] = fresh;
  }
  return true;
}

void BlockTable::erase(BlockPool& pool, int32_t first, int32_t n) {
  const auto begin = blocks.begin() + first;
  for (auto it = begin; it != begin + n; ++it)
    if (*it != kNoBlock) pool.release(*it);
  blocks.erase(begin, begin + n);
}

}  // namespace duet
