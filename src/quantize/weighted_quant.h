// Importance-weighted quantizers for the 32-element types whose reference
// rule (kernels/quant.h) is fixed: Q4_0 and Q4_1. They write the same block
// layouts, choosing each block's scale (and offset) to minimize
// sum importance[i] * (x[i] - dequantized[i])^2 — with importance the mean
// squared activation of input channel i, that is the expected squared error
// the block adds to a matrix product's output (AWQ/GPTQ's view of error).
// The reference scale is one of the candidates, so under the weighted error
// a block is never worse than with the reference scale.
#pragma once

#include <cstdint>

namespace duet {

// k a multiple of 32; importance holds k values >= 0.
void quantize_row_q4_0_weighted(const float* x, void* y, int64_t k, const float* importance);
void quantize_row_q4_1_weighted(const float* x, void* y, int64_t k, const float* importance);

}  // namespace duet
