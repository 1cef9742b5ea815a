// A model's chat template: the Jinja program (tokenizer.chat_template in GGUF
// metadata or tokenizer_config.json) that turns a conversation into prompt
// text, rendered with the variables Hugging Face's apply_chat_template sets:
// messages, add_generation_prompt, bos_token, eos_token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace duet {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

class ChatTemplate {
 public:
  // Parses `source`; an unsupported construct is an error naming it and its
  // line:column. bos_token/eos_token are the texts of the vocabulary's BOS
  // and EOS tokens ("<s>", "<|begin_of_text|>").
  static Result<ChatTemplate> parse(std::string_view source, std::string bos_token, std::string eos_token);
  // As parse, with the texts of `tok`'s BOS and EOS ("" where it has none).
  static Result<ChatTemplate> parse_for(std::string_view source, const Tokenizer& tok);

  // The prompt text for `messages`; with add_generation_prompt, ending with
  // the header that starts the assistant's reply. A template's own
  // raise_exception() comes back as the error.
  Result<std::string> apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                            const jinja::Limits& limits = {}) const;

  const std::string& source() const { return source_; }

 private:
  jinja::Template template_;
  std::string source_, bos_, eos_;
};

}  // namespace duet
