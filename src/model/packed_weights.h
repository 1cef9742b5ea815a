// The packed copies of a model's matrices (kernels/packed_gemm.h). Packing
// trades the mapped file's zero-copy load for a kernel that runs at several
// times the int8 rate; weights this machine has no packed kernels for stay
// mapped in place.
#pragma once

#include <memory>
#include <vector>

#include "core/error.h"
#include "core/huge_buffer.h"
#include "core/tensor.h"

namespace duet {

class PackedWeights {
 public:
  // A packed copy of `w` (owned here) when it can be packed, else &w.
  Result<const TensorView*> pack(const TensorView& w);
  // Bytes held by packed copies.
  size_t bytes() const;

 private:
  struct Entry {
    TensorView view;
    HugeBuffer buffer;
  };
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace duet
