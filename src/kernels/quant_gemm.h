// Register-blocked dot products of quantized weight rows with several Q8_0
// activation rows at once (matrix x matrix): each weight vector loaded is
// used by every token of the block, and each token's activations by every
// row, so prefill and batched decode run on the int8 units instead of on
// loads. Every (row, token) dot has its own accumulator, summed block pair
// by block pair in the same order however many rows and tokens share the
// call, so one token alone (decode) gets the same bits as inside a batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/dtype.h"

namespace duet {

// y[t * y_stride + r] = dot(weight row r, activation row t) for n_rows rows
// (w_stride bytes apart) and n_tok Q8_0 rows (x_stride bytes apart) of k
// elements.
using QuantDotBlock = void (*)(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows,
                               const uint8_t* x, size_t x_stride, int64_t n_tok, float* y,
                               int64_t y_stride);

// The blocked kernel of weight type `t` at `level`; nullptr where there is
// none (matmul then uses the type's vec_dot row by row).
QuantDotBlock quant_dot_block_at(DType t, CpuLevel level);
QuantDotBlock quant_dot_block(DType t);

QuantDotBlock quant_dot_block_avx512(DType t);

}  // namespace duet
