// The one dispatch point from (weight type, CPU level) to kernels: float
// types here, quantized types in quant_kernels.cc.
#include "kernels/type_kernels.h"

#include "kernels/float_kernels.h"
#include "kernels/quant_kernels.h"

namespace duet {

const FloatKernels* float_kernels_at(DType t, CpuLevel level) {
  switch (level) {
    case CpuLevel::kAvx512: return float_kernels_avx512(t);
    case CpuLevel::kAvx2: return float_kernels_avx2(t);
    default: return float_kernels_scalar(t);
  }
}

const FloatKernels* float_kernels(DType t) {
  static const CpuLevel level = active_cpu_level();
  return float_kernels_at(t, level);
}

const TypeKernels* type_kernels_at(DType t, CpuLevel level) {
  if (const FloatKernels* f = float_kernels_at(t, level)) return &f->traits;
  return quant_type_kernels(t, level);
}

const TypeKernels* type_kernels(DType t) {
  static const CpuLevel level = active_cpu_level();
  return type_kernels_at(t, level);
}

}  // namespace duet
