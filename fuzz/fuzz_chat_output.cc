// A chat model's output, which duet does not control, through the parser
// that splits it into content, reasoning and tool calls. The first byte
// picks the format (tool-call style, <think> markers, a reasoning block
// opened by the prompt, tools offered or not) and the second the sizes of
// the pieces the text is fed in (bit 5 of the first: calls forced by a
// grammar, streamed as written). Beyond not crashing, it checks what the
// server relies on: fed whole or in pieces, the result is the same, and
// with nothing to look for the text comes back as content unchanged. The
// whole response's way (finish with all the text, calls parsed whole) is
// run too, for its deltas adding up to its message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_output_parser.h"

namespace {

using duet::server::ChatDelta;
using duet::server::ChatFormat;
using duet::server::ChatOutputParser;
using duet::server::ParsedMessage;

// The message rebuilt from the deltas; traps when it differs from the
// parser's own accumulation. step_seed 0: fed whole in one piece; ~0u:
// given whole to finish().
ParsedMessage run(const ChatFormat& f, bool tools, bool forced, std::string_view text, unsigned step_seed) {
  int n = 0;
  ChatOutputParser p(f, tools, [&n] { return std::to_string(n++); }, forced);
  ParsedMessage m;
  const auto take = [&](const std::vector<ChatDelta>& ds) {
    for (const ChatDelta& d : ds) {
      if (d.kind == ChatDelta::kContent) m.content += d.text;
      if (d.kind == ChatDelta::kReasoning) m.reasoning += d.text;
      if (d.kind == ChatDelta::kToolCall) m.tool_calls.push_back(d.call);
      if (d.kind == ChatDelta::kToolCallArguments) {
        if (m.tool_calls.size() != static_cast<size_t>(d.index) + 1) __builtin_trap();
        m.tool_calls.back().arguments += d.text;
      }
    }
  };
  size_t at = step_seed == ~0u ? text.size() : 0;
  for (unsigned i = 0; at < text.size(); ++i) {
    const size_t len = step_seed == 0 ? text.size() : 1 + ((step_seed >> (i % 8)) + i) % 7;
    take(p.feed(text.substr(at, len)));
    at += len;
  }
  take(p.finish(step_seed == ~0u ? text : std::string_view()));
  if (m.content != p.message().content || m.reasoning != p.message().reasoning ||
      m.tool_calls.size() != p.message().tool_calls.size())
    __builtin_trap();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const unsigned mode = data[0], steps = data[1] | 1u;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  ChatFormat f;
  f.tools = static_cast<duet::server::ToolCallStyle>(mode % 4);
  if (mode & 4) f.think_open = "<think>", f.think_close = "</think>";
  f.starts_in_reasoning = (mode & 8) != 0;
  const bool tools = (mode & 16) != 0, forced = (mode & 32) != 0;

  const ParsedMessage whole = run(f, tools, forced, text, 0);
  const ParsedMessage pieces = run(f, tools, forced, text, steps);
  run(f, tools, forced, text, ~0u);
  if (whole.content != pieces.content || whole.reasoning != pieces.reasoning ||
      whole.tool_calls.size() != pieces.tool_calls.size())
    __builtin_trap();
  for (size_t i = 0; i < whole.tool_calls.size(); ++i)
    if (whole.tool_calls[i].name != pieces.tool_calls[i].name ||
        whole.tool_calls[i].arguments != pieces.tool_calls[i].arguments)
      __builtin_trap();
  if (!tools && f.think_open.empty() && whole.content != text) __builtin_trap();
  return 0;
}
