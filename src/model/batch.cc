#include "model/batch.h"

namespace duet {

int32_t Batch::n_logits() const {
  int32_t n = 0;
  for (uint8_t w : want_logits) n += w;
  return n;
}

int32_t Batch::add_sequence(const BlockTable* table) {
  tables.push_back(table);
  return static_cast<int32_t>(tables.size()) - 1;
}

void Batch::add(int32_t token, int32_t position, int32_t seq_index, bool logits) {
  tokens.push_back(token);
  positions.push_back(position);
  seq.push_back(seq_index);
  want_logits.push_back(logits ? 1 : 0);
}

void Batch::clear() {
  tokens.clear();
  positions.clear();
  seq.clear();
  want_logits.clear();
  tables.clear();
  copies.clear();
}

}  // namespace duet
