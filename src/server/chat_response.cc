#include "server/chat_response.h"

#include "server/openai_response.h"

namespace duet::server {

using nlohmann::json;

namespace {

json call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

json chat_message_json(const ParsedMessage& m) {
  json msg = {{"role", "assistant"}};
  msg["content"] = m.tool_calls.empty() || !m.content.empty() ? json(m.content) : json(nullptr);
  if (!m.reasoning.empty()) msg["reasoning_content"] = m.reasoning;
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : m.tool_calls) calls.push_back(call_json(c));
    msg["tool_calls"] = std::move(calls);
  }
  return msg;
}

std::vector<json> chat_delta_json(const std::vector<ChatDelta>& deltas) {
  std::vector<json> out;
  for (const ChatDelta& d : deltas) {
    switch (d.kind) {
      case ChatDelta::kContent: out.push_back({{"content", d.text}}); break;
      case ChatDelta::kReasoning: out.push_back({{"reasoning_content", d.text}}); break;
      case ChatDelta::kToolCall: {
        json head = call_json(d.call);
        head["function"]["arguments"] = "";
        head["index"] = d.index;
        out.push_back({{"tool_calls", json::array({head})}});
        if (d.call.arguments.empty()) break;  // they follow as pieces
        json args = {{"index", d.index}, {"function", {{"arguments", d.call.arguments}}}};
        out.push_back({{"tool_calls", json::array({args})}});
        break;
      }
      case ChatDelta::kToolCallArguments:
        out.push_back({{"tool_calls", json::array({{{"index", d.index}, {"function", {{"arguments", d.text}}}}})}});
        break;
    }
  }
  return out;
}

const char* chat_finish_reason(const ParsedMessage& m, FinishReason r) {
  if (!m.tool_calls.empty() && r == FinishReason::kStop) return "tool_calls";
  return openai_finish_reason(r);
}

}  // namespace duet::server
