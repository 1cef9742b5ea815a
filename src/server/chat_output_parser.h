// A chat model's output text split into what the API reports apart: the
// reply's content, its reasoning (<think> blocks) and its tool calls. Fed
// text as it is generated, it returns deltas as soon as they are certain;
// streaming sends each as a chunk, and a whole response is the accumulation
// (message()), so the two cannot disagree.
//
// Text that may be the start of a marker ("<tool_c") is held back until the
// next text decides it. A tool call the model chose to make is reported
// once it is complete (its closing marker, or the end of the output): a
// call whose JSON does not parse, or lacks a name or an object of
// arguments, comes back as plain content, exactly as the model wrote it.
// Calls a grammar forces cannot be malformed, so they stream as written:
// the call once its name is complete, then its arguments in pieces.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_format.h"
#include "server/forced_call_stream.h"

namespace duet::server {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ChatDelta {
  // kToolCall: a call (its arguments whole, or empty when they follow as
  // kToolCallArguments pieces).
  enum Kind { kContent, kReasoning, kToolCall, kToolCallArguments };
  Kind kind = kContent;
  std::string text;  // kContent, kReasoning, kToolCallArguments
  int index = 0;     // kToolCall, kToolCallArguments: its position among the reply's calls
  ToolCall call;     // kToolCall
};

// The reply as a whole: the accumulation of every delta.
struct ParsedMessage {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
};

class ChatOutputParser {
 public:
  // `parse_tools`: look for tool calls (the request has tools and a
  // tool_choice other than none). `new_id` names each call. `forced`: a
  // grammar makes the output calls, so they stream as they are written
  // (forced_call_stream.h) instead of once each is complete.
  ChatOutputParser(ChatFormat format, bool parse_tools, std::function<std::string()> new_id, bool forced = false);

  std::vector<ChatDelta> feed(std::string_view text);
  // The output has ended: whatever was held back, decided.
  std::vector<ChatDelta> finish();

  const ParsedMessage& message() const { return message_; }

 private:
  enum class Mode { kStart, kReasoning, kAfterReasoning, kContent, kToolBlock, kToolTail, kForcedCalls };

  // One step over pending_; false when it needs more text to decide.
  bool step(std::vector<ChatDelta>& out);
  bool step_start(std::vector<ChatDelta>& out);
  bool step_reasoning(std::vector<ChatDelta>& out);
  bool step_content(std::vector<ChatDelta>& out);
  bool step_tool_block(std::vector<ChatDelta>& out);
  void step_forced(std::vector<ChatDelta>& out);
  void take_forced(std::vector<ForcedCallStream::Event>& events, std::vector<ChatDelta>& out);

  void emit_text(ChatDelta::Kind kind, std::string text, std::vector<ChatDelta>& out);
  // Turns `calls` into deltas, or gives `raw` back as content when they do not parse.
  void emit_calls_or_content(bool parsed, std::vector<ToolCall> calls, const std::string& raw,
                             std::vector<ChatDelta>& out);
  // The tool-call markers this format's output may hold.
  std::vector<std::string_view> tool_markers() const;

  ChatFormat format_;
  bool parse_tools_;
  bool forced_;
  ForcedCallStream forced_calls_;
  std::function<std::string()> new_id_;
  Mode mode_ = Mode::kStart;
  std::string pending_;     // text not yet decided
  // The text that opened the current call (whitespace before it and its
  // marker), given back as content if the call is malformed.
  std::string tail_open_;
  size_t searched_ = 0;  // kToolBlock: pending_ before this holds no closing marker
  ParsedMessage message_;
};

// Parses the calls of one output fragment in `style`; false when it is not
// a well-formed call (or list of calls). Exposed for tests.
bool parse_hermes_call(std::string_view body, ToolCall& out);
bool parse_json_calls(std::string_view text, std::vector<ToolCall>& out);

}  // namespace duet::server
