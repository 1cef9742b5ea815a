// Prefix caching over the block pool (vLLM's automatic prefix caching): a
// full block is named by a hash chained over its kBlockTokens token ids and
// the hash of the block before it, so equal hashes mean equal prefixes. A new
// sequence starts from the cached blocks of its longest matching prefix of
// full blocks and computes only the rest. Partially filled blocks are never
// cached, so a cached block is never written again (the choices of one
// request do share a partial block: BlockTable::own_blocks copies it first).
// Hashes are 64-bit; a collision (odds ~2^-64 per pair) would reuse wrong K/V.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace duet {

// Hash of the block holding tokens[0, kBlockTokens) after a prefix whose last
// block hashed to `parent` (kPrefixRoot for the first block).
inline constexpr uint64_t kPrefixRoot = 0x6475657470726566ull;
uint64_t block_hash(uint64_t parent, const int32_t* tokens);

// Fills an empty table with the cached blocks of the longest prefix of
// full blocks of tokens[0, max_tokens) that every group of layers still
// holds (each group's block has its own hash; a sliding-window group needs
// only the blocks its window reaches from the prefix's end, and the table
// keeps kNoBlock before them), retaining each, and appends their hashes to
// `hashes` (cleared first). Returns the number of tokens covered.
int32_t match_cached_prefix(BlockPool& pool, const std::vector<int32_t>& tokens,
                            int32_t max_tokens, BlockTable& table, std::vector<uint64_t>& hashes);

// Tags every full block of tokens[0, n_tokens) in `table` beyond the
// hashes.size() already hashed, so later sequences can reuse them.
void cache_full_blocks(BlockPool& pool, const std::vector<int32_t>& tokens, int32_t n_tokens,
                       const BlockTable& table, std::vector<uint64_t>& hashes);

}  // namespace duet
