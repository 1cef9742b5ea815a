// One sequence's view of the paged cache: the blocks holding its tokens in
// order. Token at position p lives in blocks[p / kBlockTokens], slot
// p % kBlockTokens. A released block (one a sliding window has left behind)
// stays in the table as kNoBlock so later positions keep their places.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_pool.h"

namespace duet {

inline constexpr int32_t kBlockTokens = 16;
inline constexpr int32_t kNoBlock = -1;

// Copy-on-write of a shared block: the whole of `src` (every layer) is
// copied to `dst` before a forward pass writes into `dst`.
struct BlockCopy {
  int32_t src;
  int32_t dst;
};

inline int32_t blocks_for_tokens(int32_t n_tokens) {
  return (n_tokens + kBlockTokens - 1) / kBlockTokens;
}

struct BlockTable {
  std::vector<int32_t> blocks;

  int32_t capacity() const { return static_cast<int32_t>(blocks.size()) * kBlockTokens; }

  // Grows the table to hold n_tokens; false (and unchanged) if the pool runs out.
  bool reserve(BlockPool& pool, int32_t n_tokens);
  // Keeps the blocks needed for the first n_tokens and releases the rest.
  void truncate(BlockPool& pool, int32_t n_tokens);
  void release_all(BlockPool& pool) { truncate(pool, 0); }
  // Gives blocks [0, n) back to the pool, leaving kNoBlock in their places.
  void release_front(BlockPool& pool, int32_t n);
  // Removes blocks [first, first + n) from the table, releasing them: the
  // positions after them move down by n * kBlockTokens.
  void erase(BlockPool& pool, int32_t first, int32_t n);
  // A second table holding the same blocks (each retained once more): a
  // forked sequence shares its parent's cache until one of them writes.
  BlockTable share(BlockPool& pool) const;
  // Before writing positions [begin, end): every block among them that is
  // shared is replaced by a fresh one of this table's own, and the copy
  // its contents need is appended to `copies`. False (and unchanged) when
  // the pool has too few blocks to give.
  bool own_blocks(BlockPool& pool, int32_t begin, int32_t end, std::vector<BlockCopy>& copies);
};

}  // namespace duet
