// config.json's quantization_config: how a pre-quantized checkpoint stores
// its linear layers. duet reads 4-bit GPTQ (AutoGPTQ's layout, v1 and v2
// zero points), 4-bit AWQ in the GEMM layout, and FP8 E4M3 weights with
// per-tensor, per-channel or per-block scales (quant_method "fp8", or
// "compressed-tensors" in its float-quantized format). Anything else is
// refused by name rather than read as garbage.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace duet {

enum class HfQuantMethod { kNone, kGptq, kAwq, kFp8 };

struct HfQuantization {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string name;          // quant_method as config.json spells it, for messages
  int32_t bits = 0;          // GPTQ/AWQ: always 4 once parsed
  int32_t group_size = 0;    // GPTQ/AWQ: inputs per scale and zero; 0: the whole input row (-1)
  bool desc_act = false;     // GPTQ act-order: g_idx, not i / group_size, names each input's group
  int32_t zero_offset = 0;   // GPTQ v1 (AutoGPTQ) stores zero - 1, so 1 is added back; v2 stores the zero
  // FP8 block scales: one scale per block_rows x block_cols of [out, in];
  // 0 when the config names no blocks (per-tensor or per-channel scales).
  int64_t block_rows = 0, block_cols = 0;
};

// `q` is config.json's quantization_config object; `src` names the file.
Result<HfQuantization> parse_hf_quantization(const nlohmann::json& q, const std::string& src);

}  // namespace duet
