// Kernels of the quantized block types (Q8_0, Q4_0, Q4_K, Q6_K, ...), and of
// the activation formats their dot products use (Q8_0, Q8_K).
#pragma once

#include "kernels/type_kernels.h"

namespace duet {

// The kernels of quantized type `t` at `level`; nullptr if `t` is not a
// quantized type duet implements. type_kernels_at() delegates here.
const TypeKernels* quant_type_kernels(DType t, CpuLevel level);

}  // namespace duet
