// A model's chat template: the Jinja program (tokenizer.chat_template in GGUF
// metadata or tokenizer_config.json) that turns a conversation into prompt
// text, rendered with the variables Hugging Face's apply_chat_template sets:
// messages, add_generation_prompt, bos_token, eos_token, and tools and any
// further keyword arguments (Qwen3's enable_thinking) when given.
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

// A conversation as apply_chat_template(messages, tools=..., **kwargs) takes
// it, for templates that read more than role and content.
struct ChatInput {
  // A list of dicts with any fields: role, content, tool_calls,
  // reasoning_content, tool_call_id, ...
  jinja::Value messages;
  // The tool schemas; none when the request has none, as Hugging Face passes
  // tools=None (templates test `if tools` or `tools is not none`).
  jinja::Value tools = jinja::Value::none();
  // Further template globals (enable_thinking); the standard ones (messages,
  // tools, documents, add_generation_prompt, bos_token, eos_token) win over a
  // variable of the same name.
  jinja::Dict variables;
  bool add_generation_prompt = false;
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
  // As apply, for a conversation with tools, tool calls or extra variables.
  Result<std::string> render(const ChatInput& input, const jinja::Limits& limits = {}) const;

  const std::string& source() const { return source_; }

 private:
  jinja::Template template_;
  std::string source_, bos_, eos_;
};

}  // namespace duet
