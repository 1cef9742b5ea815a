#include "kv/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace duet {

namespace {

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Group g's block of the same tokens is another block: its own name.
uint64_t group_hash(uint64_t h, size_t g) { return g == 0 ? h : mix(h ^ (0xd6e8feb86659fd93ull * g)); }

}  // namespace

uint64_t block_hash(uint64_t parent, const int32_t* tokens) {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
  for (int32_t i = 0; i < kBlockTokens; ++i)
    h = mix(h + static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ull);
  return h;
}

namespace {

// The first of n blocks a group's layers still read from position n blocks on.
size_t first_read(int32_t window, size_t n) {
  const auto end = static_cast<int64_t>(n) * kBlockTokens;
  return window > 0 ? static_cast<size_t>(std::max<int64_t>(0, (end - window) / kBlockTokens)) : 0;
}

// Whether every sliding-window group has the blocks of chain[0, n) its
// window reaches from their end (vLLM matches such groups from the right too).
bool window_cached(const BlockPool& pool, const std::vector<uint64_t>& chain, size_t n) {
  for (int32_t g = 0; g < pool.n_groups(); ++g)
    for (size_t k = first_read(pool.group_window(g), n); k < n && pool.group_window(g) > 0; ++k)
      if (!pool.find(group_hash(chain[k], static_cast<size_t>(g)))) return false;
  return true;
}

}  // namespace

int32_t match_cached_prefix(BlockPool& pool, const std::vector<int32_t>& tokens,
                            int32_t max_tokens, BlockTable& table, std::vector<uint64_t>& hashes) {
  assert(table.capacity() == 0);
  hashes.clear();
  // The chain while the global groups hold every block (a global group's
  // miss ends every longer match), then the longest part of it whose
  // sliding groups hold what their windows reach.
  const int32_t n_full = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size())) / kBlockTokens;
  uint64_t parent = kPrefixRoot;
  for (int32_t k = 0; k < n_full; ++k) {
    const uint64_t h = block_hash(parent, tokens.data() + static_cast<size_t>(k) * kBlockTokens);
    bool held = true;
    for (int32_t g = 0; g < pool.n_groups() && held; ++g)
      held = pool.group_window(g) > 0 || pool.find(group_hash(h, static_cast<size_t>(g))).has_value();
    if (!held) break;
    hashes.push_back(h);
    parent = h;
  }
  size_t n = hashes.size();
  while (n > 0 && !window_cached(pool, hashes, n)) --n;
  hashes.resize(n);
  table.groups.assign(static_cast<size_t>(pool.n_groups()), std::vector<int32_t>(n, kNoBlock));
  for (int32_t g = 0; g < pool.n_groups(); ++g)
    for (size_t k = first_read(pool.group_window(g), n); k < n; ++k) {
      const int32_t block = *pool.find(group_hash(hashes[k], static_cast<size_t>(g)));
      pool.retain(block);
      table.groups[static_cast<size_t>(g)][k] = block;
    }
  return table.capacity();
}

void cache_full_blocks(BlockPool& pool, const std::vector<int32_t>& tokens, int32_t n_tokens,
                       const BlockTable& table, std::vector<uint64_t>& hashes) {
  const size_t n_full = static_cast<size_t>(n_tokens / kBlockTokens);
  assert(n_full <= table.blocks().size());
  for (size_t k = hashes.size(); k < n_full; ++k) {
    const uint64_t parent = k == 0 ? kPrefixRoot : hashes[k - 1];
    const uint64_t h = block_hash(parent, tokens.data() + k * kBlockTokens);
    // Another sequence may have cached the same contents first; this copy
    // then simply stays private and is freed with its sequence.
    for (size_t g = 0; g < table.groups.size(); ++g)
      if (const int32_t b = table.groups[g][k]; b != kNoBlock) pool.set_hash(b, group_hash(h, g));
    hashes.push_back(h);
  }
}

}  // namespace duet
