#include "kv/block_table.h"

#include <algorithm>

namespace duet {

int32_t BlockTable::n_held() const {
  int32_t n = 0;
  for (const std::vector<int32_t>& blocks : groups)
    for (int32_t b : blocks) n += b != kNoBlock;
  return n;
}

bool BlockTable::reserve(BlockPool& pool, int32_t n_tokens) {
  const size_t need = static_cast<size_t>(blocks_for_tokens(n_tokens));
  const size_t have = groups[0].size();
  if (groups.size() < static_cast<size_t>(pool.n_groups()))
    groups.resize(static_cast<size_t>(pool.n_groups()), std::vector<int32_t>(have, kNoBlock));
  if (need <= have) return true;
  if (static_cast<size_t>(pool.n_free()) < (need - have) * groups.size()) return false;
  for (std::vector<int32_t>& blocks : groups)
    while (blocks.size() < need) blocks.push_back(*pool.allocate());
  return true;
}

void BlockTable::truncate(BlockPool& pool, int32_t n_tokens) {
  const size_t keep = static_cast<size_t>(blocks_for_tokens(n_tokens));
  for (std::vector<int32_t>& blocks : groups)
    while (blocks.size() > keep) {
      if (blocks.back() != kNoBlock) pool.release(blocks.back());
      blocks.pop_back();
    }
}

void BlockTable::release_front(BlockPool& pool, int32_t group, int32_t n) {
  // The released blocks form a prefix of the list, so walking back from the
  // n-th stops at the first block an earlier step released.
  std::vector<int32_t>& blocks = groups[static_cast<size_t>(group)];
  for (size_t i = std::min(static_cast<size_t>(std::max(n, 0)), blocks.size()); i-- > 0;) {
    if (blocks[i] == kNoBlock) break;
    pool.release(blocks[i]);
    blocks[i] = kNoBlock;
  }
}

BlockTable BlockTable::share(BlockPool& pool) const {
  for (const std::vector<int32_t>& blocks : groups)
    for (int32_t b : blocks)
      if (b != kNoBlock) pool.retain(b);
  return *this;
}

bool BlockTable::own_blocks(BlockPool& pool, int32_t begin, int32_t end, std::vector<BlockCopy>& copies) {
  const size_t first = static_cast<size_t>(begin / kBlockTokens);
  const size_t last = std::min(groups[0].size(), static_cast<size_t>(blocks_for_tokens(end)));
  const auto shared = [&](int32_t b) { return b != kNoBlock && pool.refcount(b) > 1; };
  int32_t n_shared = 0;
  for (const std::vector<int32_t>& blocks : groups)
    for (size_t k = first; k < last; ++k) n_shared += shared(blocks[k]);
  if (n_shared > pool.n_free()) return false;
  for (std::vector<int32_t>& blocks : groups)
    for (size_t k = first; k < last; ++k) {
      if (!shared(blocks[k])) continue;
      const int32_t fresh = *pool.allocate();
      copies.push_back({blocks[k], fresh});
      pool.release(blocks[k]);
      blocks[k] = fresh;
    }
  return true;
}

void BlockTable::erase(BlockPool& pool, int32_t first, int32_t n) {
  for (std::vector<int32_t>& blocks : groups) {
    const auto begin = blocks.begin() + first;
    for (auto it = begin; it != begin + n; ++it)
      if (*it != kNoBlock) pool.release(*it);
    blocks.erase(begin, begin + n);
  }
}

}  // namespace duet
