// Kernels of the quantized block types (Q8_0, Q4_0, Q4_K, Q6_K, ...), and of
// the activation formats their dot products use (Q8_0, Q8_K).
#pragma once

#include "kernels/type_kernels.h"

namespace duet {

// The kernels of each quantized type at one level (kernels/registry.h picks).
struct QuantTypeKernels {
  TypeKernels q8_0, q4_0, q4_1, q4_K, q5_K, q6_K;
};
extern const QuantTypeKernels kQuantScalar, kQuantAvx2, kQuantAvx512;

}  // namespace duet
