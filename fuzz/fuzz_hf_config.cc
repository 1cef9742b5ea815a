// A Hugging Face config.json from untrusted text, as `duet convert` imports
// it: the architecture, hyper-parameters, RoPE scaling and quantization_config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = duet::parse_hf_config(text, "config.json");
  if (c && c->rope_scaling.type == "llama3") (void)duet::llama3_rope_divisors(*c);
  return 0;
}
