// The chat completion's reply in OpenAI's JSON, from the output parser:
// the whole message (content, reasoning_content, tool_calls) and the
// streamed deltas. A tool call streams as OpenAI's do: a first delta with
// its index, id, type, name and empty arguments, then deltas of index and
// argument text.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/chat_output_parser.h"

namespace duet::server {

// {"role": "assistant", "content": ..., ["reasoning_content"], ["tool_calls"]};
// content is null when the reply is only tool calls.
nlohmann::json chat_message_json(const ParsedMessage& m);

// The delta objects for `deltas`, in order.
std::vector<nlohmann::json> chat_delta_json(const std::vector<ChatDelta>& deltas);

// "tool_calls" when the reply made calls and ended normally, else the
// engine's reason as OpenAI names it (nullptr for none).
const char* chat_finish_reason(const ParsedMessage& m, FinishReason r);

}  // namespace duet::server
