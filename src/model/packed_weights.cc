#include "model/packed_weights.h"

#include "kernels/packed_gemm.h"

namespace duet {

Result<const TensorView*> PackedWeights::pack(const TensorView& w) {
  if (!packable(w)) return &w;
  auto e = std::make_unique<Entry>();
  DUET_ASSIGN(e->buffer, HugeBuffer::allocate(w.nbytes, w.name));
  pack_weights(w, e->buffer.data());
  DUET_TRY(e->buffer.seal());
  e->view = w;
  e->view.data = e->buffer.data();
  e->view.packed = true;
  entries_.push_back(std::move(e));
  return &entries_.back()->view;
}

size_t PackedWeights::bytes() const {
  size_t n = 0;
  for (const auto& e : entries_) n += e->buffer.size();
  return n;
}

}  // namespace duet
