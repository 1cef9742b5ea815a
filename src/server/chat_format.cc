#include "server/chat_format.h"

namespace duet::server {

ChatFormat chat_format_for_template(std::string_view source) {
  ChatFormat f;
  const auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has("[TOOL_CALLS]")) f.tools = has("[ARGS]") ? ToolCallStyle::kMistralArgs : ToolCallStyle::kMistral;
  else if (has("<tool_call>")) f.tools = ToolCallStyle::kHermes;
  else if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\"")))
    f.tools = ToolCallStyle::kLlama3;
  if (has("<think>")) {
    f.think_open = "<think>";
    f.think_close = "</think>";
  }
  return f;
}

bool prompt_opens_reasoning(const ChatFormat& format, std::string_view prompt) {
  if (format.think_open.empty()) return false;
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ' || prompt.back() == '\r'))
    prompt.remove_suffix(1);
  const size_t open = prompt.rfind(format.think_open);
  if (open == std::string_view::npos) return false;
  // Open when nothing but whitespace follows the last opening marker.
  return open + format.think_open.size() == prompt.size();
}

std::string_view tool_call_style_name(ToolCallStyle s) {
  switch (s) {
    case ToolCallStyle::kHermes: return "hermes";
    case ToolCallStyle::kLlama3: return "llama3";
    case ToolCallStyle::kMistral: return "mistral";
    case ToolCallStyle::kMistralArgs: return "mistral-args";
  }
  return "?";
}

}  // namespace duet::server
