// Kernels of the float weight types (F32, F16, BF16). Their activations stay
// F32 for every type: the weight row is what decode reads from memory, and
// widening F16/BF16 to F32 in registers is exact and costs no bandwidth, so
// narrowing the activations would lose precision for no speed. Each level's
// dot_block equals its vec_dot bit for bit.
#pragma once

#include "kernels/type_kernels.h"

namespace duet {

// The kernels of each float type at one level (kernels/registry.h picks).
struct FloatTypeKernels {
  TypeKernels f32, f16, bf16;
};
extern const FloatTypeKernels kFloatScalar, kFloatAvx2, kFloatAvx512;

}  // namespace duet
