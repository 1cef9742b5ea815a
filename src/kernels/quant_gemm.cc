#include "kernels/quant_gemm.h"

namespace duet {

QuantDotBlock quant_dot_block_at(DType t, CpuLevel level) {
  return level == CpuLevel::kAvx512 ? quant_dot_block_avx512(t) : nullptr;
}

QuantDotBlock quant_dot_block(DType t) {
  static const CpuLevel level = active_cpu_level();
  return quant_dot_block_at(t, level);
}

}  // namespace duet
