// The body of POST /v1/chat/completions and /v1/completions from untrusted
// text, parsed into engine parameters as the server does it (every input
// is tried as both); a chat request's messages then go through a built-in
// chat template as the server's prompt would.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/openai_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_templates_builtin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const duet::ChatTemplate chatml = [] {
    auto t = duet::ChatTemplate::parse(*duet::builtin_chat_template("chatml"), "<s>", "</s>");
    if (!t) __builtin_trap();
    return std::move(t).value();
  }();
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {false, true}) {
    duet::server::GenerateRequest r;
    if (auto e = duet::server::parse_generate_body(body, chat, r)) {
      (void)e->to_json();
      continue;
    }
    if (chat) (void)chatml.apply(r.messages, /*add_generation_prompt=*/true);
  }
  return 0;
}
