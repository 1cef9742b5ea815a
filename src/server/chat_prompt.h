// Chat messages to prompt text when the server has no chat template
// configured: the tokenizer's built-in Llama 2 template, used when the
// model's own template is Llama 2's (it contains "[INST]") or when it has
// none and a SentencePiece ("llama") vocabulary with BOS and EOS. Any other
// model gets a clear error instead of a wrong format.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"

namespace duet::server {

// The Llama 2 prompt text of the conversation (with <s>/</s> markers, to be
// encoded with special tokens parsed and no extra BOS), or why this model
// cannot chat in that format.
Result<std::string> llama2_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages);

}  // namespace duet::server
