// Per-weight-type kernel traits (ggml's idea): the activation format a type's
// dot product wants (vec_dot_type), a converter into it, the dot product, and
// dequantization. One table per CPU level; the active one is chosen once.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "core/dtype.h"

namespace duet {

struct TypeKernels {
  DType vec_dot_type = DType::F32;
  // Converts a row of k floats into vec_dot_type (k a multiple of its block).
  void (*from_float)(const float* x, void* y, int64_t k) = nullptr;
  // Dot product of a weight row (this type) and an activation row (vec_dot_type).
  float (*vec_dot)(int64_t k, const void* w_row, const void* x_row) = nullptr;
  // Dequantizes a weight row of k elements to float.
  void (*to_float)(const void* row, float* y, int64_t k) = nullptr;
};

// The kernels of `t` for the active CPU level (nullptr if duet has none).
const TypeKernels* type_kernels(DType t);
// The kernels of `t` at a given level (nullptr if none); tests compare these.
const TypeKernels* type_kernels_at(DType t, CpuLevel level);

}  // namespace duet
