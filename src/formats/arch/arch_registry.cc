// The records of every architecture duet runs, in Arch's order: one file
// per family defines its records.
#include <array>

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

namespace {

const std::array<ArchRecord, 12>& records() {
  static const std::array<ArchRecord, 12> all = {
      llama_record(), mistral_record(), qwen2_record(),  qwen2moe_record(), qwen3_record(), qwen3moe_record(),
      olmoe_record(), olmo2_record(),   gemma2_record(), gemma3_record(),   phi3_record(),  deepseek2_record(),
  };
  return all;
}

}  // namespace

const ArchRecord& arch_record(Arch a) { return records()[static_cast<size_t>(a)]; }

const ArchTraits& arch_traits(Arch a) { return arch_record(a).traits; }

const char* arch_name(Arch a) { return arch_record(a).gguf_name; }

const ArchRecord* find_arch(std::string_view gguf_name) {
  for (const ArchRecord& r : records())
    if (gguf_name == r.gguf_name) return &r;
  return nullptr;
}

const ArchRecord* find_hf_class(std::string_view hf_class, const HfClass** which) {
  for (const ArchRecord& r : records())
    for (const HfClass& h : r.hf_classes)
      if (hf_class == h.name) {
        if (which) *which = &h;
        return &r;
      }
  return nullptr;
}

std::string supported_architectures() {
  std::string list;
  for (const ArchRecord& r : records()) list += (list.empty() ? "" : ", ") + std::string(r.gguf_name);
  return list;
}

std::string supported_hf_classes() {
  std::string list;
  for (const ArchRecord& r : records())
    for (const HfClass& h : r.hf_classes) list += (list.empty() ? "" : ", ") + std::string(h.name);
  return list;
}

}  // namespace duet
