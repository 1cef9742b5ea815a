// The pool of fixed-size KV blocks. Blocks are reference counted so that
// sequences can share prefix blocks. A block whose last holder releases it
// goes back to the free list, unless it carries a prefix-cache hash: then it
// is kept, unreferenced, so a later request with the same prefix can revive
// it, and is evicted least-recently-released first when the pool needs room.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace duet {

class BlockPool {
 public:
  // group_window: one entry per list of blocks each sequence's table
  // holds, one per group of layers (kv/kv_groups.h), the tokens that
  // group's layers attend back (0: all); a table takes one block of each
  // group for every kBlockTokens tokens.
  explicit BlockPool(int32_t n_blocks, std::vector<int32_t> group_window = {0});

  // A block with reference count 1: a free one, else the least recently used
  // cached one (forgotten by the cache); nothing when every block is held.
  std::optional<int32_t> allocate();
  // Adds a holder; a cached block with no holders is revived.
  void retain(int32_t block);
  void release(int32_t block);

  // Tags a held, full block with the hash of its contents (and everything
  // before it) so it outlives its holders. False when another block already
  // holds that hash or this one is tagged: the block stays as it was.
  bool set_hash(int32_t block, uint64_t hash);
  // The block tagged with `hash`, held or cached.
  std::optional<int32_t> find(uint64_t hash) const;

  int32_t n_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t n_groups() const { return static_cast<int32_t>(group_window_.size()); }
  int32_t group_window(int32_t group) const { return group_window_[static_cast<size_t>(group)]; }
  // Blocks allocate() can hand out: free ones and unreferenced cached ones.
  int32_t n_free() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
  // Unreferenced blocks kept for the prefix cache (a subset of n_free()).
  int32_t n_cached() const { return static_cast<int32_t>(lru_.size()); }
  int32_t n_used() const { return n_blocks() - n_free(); }
  int32_t refcount(int32_t block) const { return refcount_[static_cast<size_t>(block)]; }

 private:
  void forget_hash(int32_t block);

  std::vector<int32_t> group_window_;
  std::vector<int32_t> free_;      // stack of free, untagged block ids
  std::vector<int32_t> refcount_;  // [n_blocks]
  std::vector<uint64_t> hash_;     // [n_blocks]; meaningful where tagged_
  std::vector<uint8_t> tagged_;    // [n_blocks]
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::list<int32_t> lru_;                        // unreferenced tagged blocks, oldest first
  std::vector<std::list<int32_t>::iterator> lru_pos_;  // [n_blocks]; lru_.end() when not in lru_
};

}  // namespace duet
