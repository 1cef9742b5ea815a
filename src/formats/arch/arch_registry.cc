// The records of every architecture duet runs, in Arch's order.
#include <array>

#include "formats/arch/families.h"

namespace duet {
namespace {

const std::array<ArchRecord, 12>& records() {
  static const std::array<ArchRecord, 12> all = {
      llama_record(), mistral_record(), qwen2_record(),  qwen2moe_record(), qwen3_record(), qwen3moe_record(),
      olmoe_record(), olmo2_record(),   gemma2_record(), gemma3_record(),   phi3_record(),  deepseek2_record(),
  };
  return all;
}

}  // namespace

const ArchRecord& arch_record(Arch a) {
  const ArchRecord& r = records()[static_cast<size_t>(a)];
  return r;
}

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
