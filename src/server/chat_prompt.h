// Chat messages to prompt token ids. Until the tokenizer has a chat-template
// engine, one format is built in: Llama 2's
//   <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
// used when the model's own template is Llama 2's (it contains "[INST]") or
// when it has none and a SentencePiece ("llama") vocabulary with BOS and EOS.
// Any other model gets a clear error instead of a wrong format.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "server/openai_request.h"

namespace duet::server {

// Why the model cannot chat, or nothing when it can.
Status chat_supported(const Model& model);

// The Llama 2 prompt text of the conversation (with <s>/</s> markers, to be
// encoded with special tokens parsed and no extra BOS).
std::string llama2_chat_prompt(const std::vector<ChatMessage>& messages);

}  // namespace duet::server
