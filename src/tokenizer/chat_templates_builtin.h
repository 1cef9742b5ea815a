// Chat templates by name, for models whose file carries none (or a wrong
// one): `--chat-template llama3`. Each is the template its model family
// publishes in its tokenizer_config.json.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace duet {

// The Jinja source of the built-in template `name`; nothing if unknown.
std::optional<std::string_view> builtin_chat_template(std::string_view name);

// "llama2", "llama3", "mistral", "chatml", "qwen3", "gemma", "gemma3", "phi3",
// "phi3.5".
std::vector<std::string_view> builtin_chat_template_names();

}  // namespace duet
