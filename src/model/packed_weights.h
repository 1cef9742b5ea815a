// The packed copies of a model's matrices (kernels/packed_gemm.h). Packing
// trades the mapped file's zero-copy load for a kernel that runs at several
// times the int8 rate; weights this machine has no packed kernels for stay
// mapped in place.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/huge_buffer.h"
#include "core/tensor.h"

namespace duet {

class PackedWeights {
 public:
  // Repoints every slot whose tensor can be packed at a packed copy owned
  // here (slots naming the same tensor share one copy). The copying is spread
  // over the machine's cores: most of a load's time is the kernel handing
  // out (zeroing) fresh pages, which threads do in parallel.
  Status pack(std::span<const TensorView** const> slots);

 private:
  struct Entry {
    TensorView view;
    HugeBuffer buffer;
  };
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace duet
