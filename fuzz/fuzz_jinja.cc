// A chat template from untrusted text (a GGUF's tokenizer.chat_template, a
// tokenizer_config.json, --chat-template FILE): parsed, then rendered over a
// fixed short conversation under tight limits, so that a template that loops
// or grows its output is stopped by the limits, not by the fuzzer's timeout.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = duet::ChatTemplate::parse(source, "<s>", "</s>");
  if (!tmpl) return 0;
  static const std::vector<duet::ChatMessage> messages = {
      {"system", "Be brief."},
      {"user", "Hi! What is 2+2?"},
      {"assistant", "4."},
      {"user", "And ünï 🦙?"},
  };
  duet::jinja::Limits limits;
  limits.max_output_bytes = 1u << 16;
  limits.max_value_size = 1u << 16;
  limits.max_work = int64_t{1} << 18;
  (void)tmpl->apply(messages, /*add_generation_prompt=*/true, limits);
  return 0;
}
