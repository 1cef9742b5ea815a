// A chat request's `messages`, checked, in the two forms duet uses: plain
// role/content pairs, and the list a chat template reads (assistant turns
// with tool_calls and reasoning_content, tool results with tool_call_id),
// in the shape Hugging Face's apply_chat_template takes (a call's arguments
// as an object when they parse).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "server/api_error.h"
#include "tokenizer/chat_template.h"

namespace duet::server {

// Roles: system (and developer, its new name), user, assistant, tool.
std::optional<ApiError> read_chat_messages(const nlohmann::ordered_json& body, std::vector<ChatMessage>& plain,
                                           nlohmann::ordered_json& for_template);

}  // namespace duet::server
