// Each family's records, gathered by arch_registry.cc. One file per family.
#pragma once

#include "formats/arch/arch.h"

namespace duet {

ArchRecord llama_record();      // llama.cc
ArchRecord mistral_record();
ArchRecord qwen2_record();      // qwen.cc
ArchRecord qwen2moe_record();
ArchRecord qwen3_record();
ArchRecord qwen3moe_record();
ArchRecord olmoe_record();      // olmo.cc
ArchRecord olmo2_record();
ArchRecord gemma2_record();     // gemma.cc
ArchRecord gemma3_record();
ArchRecord phi3_record();       // phi3.cc
ArchRecord deepseek2_record();  // deepseek2.cc

}  // namespace duet
