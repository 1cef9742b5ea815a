// Chat messages to prompt text. With a chat template, rendered with the
// request's tools, tool calls and template variables; when the template
// knows nothing of tools, duet describes them in a system message and
// writes calls and results in the Hermes style (<tool_call>,
// <tool_response>) itself. Without a template: the tokenizer's built-in
// Llama 2 template, used when the model's own template is Llama 2's (it
// contains "[INST]") or when it has none and a SentencePiece ("llama")
// vocabulary with BOS and EOS. Any other model gets a clear error instead
// of a wrong format.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/chat_template.h"

namespace duet::server {

// The Llama 2 prompt text of the conversation (with <s>/</s> markers, to be
// encoded with special tokens parsed and no extra BOS), or why this model
// cannot chat in that format.
Result<std::string> llama2_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages);

// The prompt text of chat request `r` under `tmpl` (null: the Llama 2
// fallback above). Sets r.format (how the reply will be written), and
// r.params.grammar when the request forces tool calls.
std::optional<ApiError> render_chat_request(const ChatTemplate* tmpl, const Model& model, GenerateRequest& r,
                                            std::string& prompt);

}  // namespace duet::server
