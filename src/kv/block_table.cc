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
    pool.release(blocks.back());
    blocks.pop_back();
  }
}

}  // namespace duet
