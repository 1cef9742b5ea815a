// One flat batch of tokens for a forward pass (DESIGN.md, "The path of one
// request"): prefill is many rows of one sequence, decode one row of many.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_table.h"

namespace duet {

struct Batch {
  std::vector<int32_t> tokens;             // [n]
  std::vector<int32_t> positions;          // [n] position of each token in its sequence
  std::vector<int32_t> seq;                // [n] index into tables
  std::vector<uint8_t> want_logits;        // [n] 1 where logits are returned
  std::vector<const BlockTable*> tables;   // [n_seqs]; must cover each row's position
  // Blocks copied before the pass writes anything: copy-on-write of the
  // blocks forked sequences shared (kv/block_table.h).
  std::vector<BlockCopy> copies;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_logits() const;

  // Adds a sequence and returns its index for add().
  int32_t add_sequence(const BlockTable* table);
  void add(int32_t token, int32_t position, int32_t seq_index, bool logits);
  void clear();
};

}  // namespace duet
