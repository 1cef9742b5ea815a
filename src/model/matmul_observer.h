// A hook that sees the input of every matrix product of a forward pass, for
// tools that study activations (calibration for quantization). The forward
// pass calls it before each product; with no observer set it costs a branch.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace duet {

class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  // x: [rows][weight.ne[0]] activations about to be multiplied by `weight`.
  virtual void observe(const TensorView& weight, const float* x, int32_t rows) = 0;
};

}  // namespace duet
