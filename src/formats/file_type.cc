#include "formats/file_type.h"

namespace duet {

Result<uint32_t> llama_file_type(DType t) {
  switch (t) {
    case DType::F32: return 0u;   // LLAMA_FTYPE_ALL_F32
    case DType::F16: return 1u;   // MOSTLY_F16
    case DType::Q4_0: return 2u;  // MOSTLY_Q4_0
    case DType::Q4_1: return 3u;  // MOSTLY_Q4_1
    case DType::Q8_0: return 7u;  // MOSTLY_Q8_0
    case DType::Q5_0: return 8u;  // MOSTLY_Q5_0
    case DType::Q5_1: return 9u;  // MOSTLY_Q5_1
    case DType::Q2_K: return 10u; // MOSTLY_Q2_K
    case DType::Q3_K: return 11u; // MOSTLY_Q3_K_S: every matrix Q3_K
    case DType::Q4_K: return 14u; // MOSTLY_Q4_K_S: every matrix Q4_K
    case DType::Q5_K: return 16u; // MOSTLY_Q5_K_S
    case DType::Q6_K: return 18u; // MOSTLY_Q6_K
    case DType::IQ4_NL: return 25u; // MOSTLY_IQ4_NL
    case DType::IQ4_XS: return 30u; // MOSTLY_IQ4_XS
    case DType::BF16: return 32u; // MOSTLY_BF16
    case DType::TQ1_0: return 36u;  // MOSTLY_TQ1_0
    case DType::TQ2_0: return 37u;  // MOSTLY_TQ2_0
    default: return err("no LLAMA_FTYPE for ", dtype_name(t));
  }
}

}  // namespace duet
