// The packed copies of a model's matrices (kernels/packed_gemm.h). Packing
// trades the mapped file's zero-copy load for a kernel that runs at several
// times the int8 rate; weights this machine has no packed kernels for stay
// mapped in place.
#pragma once

#include <deque>
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

  // Bytes of the packed copies, and of the file tensors they stand for
  // (whose mapped pages loading gives back).
  size_t bytes() const { return bytes_; }
  size_t source_bytes() const { return source_bytes_; }

 private:
  // Each pack() call's copies, in one buffer; the views point into it (a
  // deque, so they stay put as views are added).
  struct Block {
    HugeBuffer buffer;
    std::deque<TensorView> views;
  };
  static constexpr size_t kAlign = 4096;  // each copy starts on a page
  std::vector<std::unique_ptr<Block>> blocks_;
  size_t bytes_ = 0, source_bytes_ = 0;
};

}  // namespace duet
