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

}  // namespace

uint64_t block_hash(uint64_t parent, const int32_t* tokens) {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
  for (int32_t i = 0; i < kBlockTokens; ++i)
    h = mix(h + static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ull);
  return h;
}

int32_t match_cached_prefix(BlockPool& pool, const std::vector<int32_t>& tokens,
                            int32_t max_tokens, BlockTable& table, std::vector<uint64_t>& hashes) {
  assert(table.blocks.empty());
  hashes.clear();
  uint64_t parent = kPrefixRoot;
  const int32_t n_full = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size())) / kBlockTokens;
  for (int32_t k = 0; k < n_full; ++k) {
    const uint64_t h = block_hash(parent, tokens.data() + static_cast<size_t>(k) * kBlockTokens);
    const auto block = pool.find(h);
    if (!block) break;
    pool.retain(*block);
    table.blocks.push_back(*block);
    hashes.push_back(h);
    parent = h;
  }
  return static_cast<int32_t>(table.blocks.size()) * kBlockTokens;
}

void cache_full_blocks(BlockPool& pool, const std::vector<int32_t>& tokens, int32_t n_tokens,
                       const BlockTable& table, std::vector<uint64_t>& hashes) {
  const size_t n_full = static_cast<size_t>(n_tokens / kBlockTokens);
  assert(n_full <= table.blocks.size());
  for (size_t k = hashes.size(); k < n_full; ++k) {
    const uint64_t parent = k == 0 ? kPrefixRoot : hashes[k - 1];
    const uint64_t h = block_hash(parent, tokens.data() + k * kBlockTokens);
    // Another sequence may have cached the same contents first; this copy
    // then simply stays private and is freed with its sequence.
    if (table.blocks[k] != kNoBlock) pool.set_hash(table.blocks[k], h);
    hashes.push_back(h);
  }
}

}  // namespace duet
