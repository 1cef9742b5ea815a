#include "quantize/rows.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "quantize/weighted_quant.h"

namespace duet {

Status row_to_float(DType from, const void* src, float* dst, int64_t k) {
  switch (from) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return {};
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return {};
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return {};
    default:
      return dequantize_row(from, src, dst, k);
  }
}

Status row_from_float(DType to, const float* src, void* dst, int64_t k, const float* importance) {
  switch (to) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return {};
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return {};
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return {};
    case DType::Q4_0:
    case DType::Q4_1:
      if (!importance) break;
      if (k % kQK32 != 0) return err(k, " elements do not fill ", dtype_name(to), " blocks");
      for (int64_t i = 0; i < k; ++i)
        if (!std::isfinite(src[i])) return err("element ", i, " is not finite (", src[i], ")");
      (to == DType::Q4_0 ? quantize_row_q4_0_weighted : quantize_row_q4_1_weighted)(src, dst, k,
                                                                                  importance);
      return {};
    default:
      break;
  }
  return quantize_row(to, src, dst, k, importance);
}

}  // namespace duet
