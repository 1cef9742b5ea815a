// How a chat model writes tool calls and reasoning in its output text, as
// its chat template teaches it: the markers the output parser looks for and
// the shape a tool-call grammar forces.
#pragma once

#include <string>
#include <string_view>

namespace duet::server {

enum class ToolCallStyle {
  // Qwen, Hermes and most ChatML models: <tool_call>{"name": .., "arguments": {..}}</tool_call>,
  // one block per call.
  kHermes,
  // Llama 3.x: the whole reply is {"name": .., "parameters": {..}} (several
  // separated by ';'), optionally after <|python_tag|>.
  kLlama3,
  // Mistral (older templates): [TOOL_CALLS][{"name": .., "arguments": {..}}, ...] to the end.
  kMistral,
  // Mistral v11+ (Magistral, Devstral, Mistral Small 3.2): [TOOL_CALLS]name[ARGS]{..},
  // the marker before each call. The output parser reads both Mistral forms
  // whichever the template writes; the style decides the forced form.
  kMistralArgs,
};

struct ChatFormat {
  ToolCallStyle tools = ToolCallStyle::kHermes;
  // Reasoning markers; empty: the model does not reason in marked blocks.
  std::string think_open, think_close;
  // The prompt already opened the reasoning block (Qwen3-style templates
  // that end the generation prompt with "<think>\n").
  bool starts_in_reasoning = false;
};

// The format a template's source implies: the tool-call markers it writes
// for assistant turns (a Mistral template that writes [ARGS] uses the newer
// form), and <think> markers when it mentions them. A
// template with neither gets Hermes-style calls (duet describes the tools
// in that style when the template cannot, see chat_prompt.h).
ChatFormat chat_format_for_template(std::string_view template_source);

// True when the rendered prompt ends inside an open reasoning block.
bool prompt_opens_reasoning(const ChatFormat& format, std::string_view prompt);

std::string_view tool_call_style_name(ToolCallStyle s);

}  // namespace duet::server
