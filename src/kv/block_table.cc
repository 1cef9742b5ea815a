#include "kv/block_table.h"

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

void BlockTable::erase(BlockPool& pool, int32_t first, int32_t n) {
  const auto begin = blocks.begin() + first;
  for (auto it = begin; it != begin + n; ++it)
    if (*it != kNoBlock) pool.release(*it);
  blocks.erase(begin, begin + n);
}

}  // namespace duet
