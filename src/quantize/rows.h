// One row of a tensor between its stored type and floats, for rewriting a
// tensor in another type: the float types convert element by element, the
// block types go through the reference quantizers (kernels/quant.h), and
// Q4_0/Q4_1 with importance through the weighted ones (weighted_quant.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace duet {

// Converts a row of k elements of `from` to k floats (any type duet reads).
Status row_to_float(DType from, const void* src, float* dst, int64_t k);
// Converts k floats to `to`, minimizing the importance-weighted error when
// importance (k values) is given.
Status row_from_float(DType to, const float* src, void* dst, int64_t k,
                      const float* importance);

}  // namespace duet
