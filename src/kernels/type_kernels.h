// Per-weight-type kernel traits (ggml's idea): the activation format a type's
// dot product wants (vec_dot_type), a converter into it, the dot product, a
// blocked dot product, and dequantization. kernels/registry.h holds those of
// every type and CPU level.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace duet {

// y[t * y_stride + r] = dot(weight row r, activation row t) for r < n_rows and
// t < n_tok: weight rows of k elements, w_stride bytes apart; activation rows
// in vec_dot_type, x_stride bytes apart. Several rows meet several tokens per
// register block (prefill), and every (row, token) dot is summed in the same
// order whatever the blocking, so one token alone (decode) gets the bits it
// gets inside a batch.
using DotBlockFn = void (*)(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x,
                            size_t x_stride, int64_t n_tok, float* y, int64_t y_stride);

struct TypeKernels {
  DType vec_dot_type = DType::F32;
  // Converts a row of k floats into vec_dot_type (k a multiple of its block).
  void (*from_float)(const float* x, void* y, int64_t k) = nullptr;
  // Dot product of a weight row (this type) and an activation row (vec_dot_type).
  float (*vec_dot)(int64_t k, const void* w_row, const void* x_row) = nullptr;
  // Dequantizes a weight row of k elements to float.
  void (*to_float)(const void* row, float* y, int64_t k) = nullptr;
  // nullptr where there is none: matmul then takes vec_dot row by row.
  DotBlockFn dot_block = nullptr;
  // dot_block walks k in chunks of this many elements (0: whole rows), so a
  // cache tile needs only a chunk of each weight row at a time.
  int64_t k_chunk = 0;
};

// The kernels of `t` for the active CPU level (nullptr if duet has none):
// kernels().type(t), for callers outside the kernels.
const TypeKernels* type_kernels(DType t);

}  // namespace duet
