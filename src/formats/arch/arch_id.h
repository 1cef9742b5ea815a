// The architectures duet runs, one per GGUF general.architecture name
// (formats/arch/arch.h holds what each one is).
#pragma once

#include <cstdint>

namespace duet {

enum class Arch : uint8_t {
  kLlama, kMistral, kQwen2, kQwen2Moe, kQwen3, kQwen3Moe, kOlmoe, kOlmo2, kGemma2, kGemma3, kPhi3, kDeepseek2,
};

// Its general.architecture, the prefix of its GGUF keys.
const char* arch_name(Arch a);

}  // namespace duet
