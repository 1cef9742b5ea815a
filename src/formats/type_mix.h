// The type mix of a model file: how many tensors, and how many bytes, each
// element type holds. A llama-quantize "Q4_K_M" file is mostly Q4_K with Q6_K
// and fallback types in it, so the file type alone does not say what runs;
// `duet inspect` and `duet run` print this instead.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace duet {

struct TypeShare {
  DType type;
  int64_t tensors = 0;
  uint64_t bytes = 0;
};

// One share per type present, most bytes first (ties by type id).
std::vector<TypeShare> type_mix(std::span<const TensorView> tensors);

// One line: "Q5_0 6 tensors 0.62 MiB (56%), Q8_0 2 tensors ...".
std::string format_type_mix(const std::vector<TypeShare>& mix);

}  // namespace duet
