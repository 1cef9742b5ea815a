// One sequence's view of the paged cache: the blocks holding its tokens in
// order, one list per group of layers (kv/kv_groups.h; one group unless the
// model mixes sliding-window and global layers). Token at position p lives
// in blocks(g)[p / kBlockTokens], slot p % kBlockTokens, for the layers of
// group g. A released block (one a sliding window has left behind) stays in
// its list as kNoBlock so later positions keep their places; every list has
// the same length.
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
  // [group][k]; grown to the pool's group count by reserve().
  std::vector<std::vector<int32_t>> groups = std::vector<std::vector<int32_t>>(1);

  std::vector<int32_t>& blocks(int32_t group = 0) { return groups[static_cast<size_t>(group)]; }
  const std::vector<int32_t>& blocks(int32_t group = 0) const { return groups[static_cast<size_t>(group)]; }
  int32_t n_groups() const { return static_cast<int32_t>(groups.size()); }
  int32_t capacity() const { return static_cast<int32_t>(groups[0].size()) * kBlockTokens; }
  // Blocks held (not released), over every group.
  int32_t n_held() const;

  // Grows the table to hold n_tokens in every group of the pool; false (and
  // unchanged) if the pool runs out.
  bool reserve(BlockPool& pool, int32_t n_tokens);
  // Keeps the blocks needed for the first n_tokens and releases the rest.
  void truncate(BlockPool& pool, int32_t n_tokens);
  void release_all(BlockPool& pool) { truncate(pool, 0); }
  // Gives group g's blocks [0, n) back to the pool, leaving kNoBlock in
  // their places.
  void release_front(BlockPool& pool, int32_t group, int32_t n);
  // Removes blocks [first, first + n) from every group, releasing them: the
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
