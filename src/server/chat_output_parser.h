// A chat model's output text split into what the API reports apart: the
// reply's content, its reasoning (<think> blocks) and its tool calls. Fed
// text as it is generated, it returns deltas as soon as they are certain;
// streaming sends each as a chunk, and a whole response is the accumulation
// (message()), so the two cannot disagree.
//
// Text that may be the start of a marker ("<tool_c") is held back until the
// next text decides it. A tool call streams as OpenAI's do: reported (id,
// name) as soon as its head is read, then its arguments in pieces as they
// are written, with whitespace outside strings left out (so they add up to
// the arguments of the same call parsed whole). What does not read as a call
// comes back as content, exactly as the model wrote it; once a call is
// reported it cannot be taken back, so arguments that turn out malformed
// stay as written, as OpenAI's may.
//
// finish(text) ends the output knowing nothing follows: a call not yet
// begun is then parsed whole (a whole response is finish(all of it)),
// so a malformed one there is content rather than a broken call.
// Calls a grammar forces cannot be malformed, so they stream as written.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/call_object_reader.h"
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
  // grammar makes the output calls, so they stream exactly as written
  // (forced_call_stream.h), whitespace included, and are never parsed whole.
  ChatOutputParser(ChatFormat format, bool parse_tools, std::function<std::string()> new_id, bool forced = false);

  std::vector<ChatDelta> feed(std::string_view text);
  // The output ends with `text`: whatever was held back, decided.
  std::vector<ChatDelta> finish(std::string_view text = {});

  const ParsedMessage& message() const { return message_; }

 private:
  enum class Mode {
    kStart,
    kReasoning,
    kAfterReasoning,
    kContent,
    kToolBlock,      // Hermes: after <tool_call>, its call not yet reported
    kMistralCalls,   // after [TOOL_CALLS]: which of the two forms follows
    kMistralHead,    // [TOOL_CALLS]name[ARGS]: the name
    kJsonCalls,      // Llama 3, older Mistral: the rest of the output is JSON calls
    kCallArguments,  // a reported call's arguments (call_), then after_call_
    kCallEnd,        // Hermes: a streamed call's object has ended; its closing marker
    kTextTail,       // the rest of the output is content
    kForcedCalls,
  };

  // One step over pending_; false when it needs more text to decide.
  bool step(std::vector<ChatDelta>& out);
  bool step_start(std::vector<ChatDelta>& out);
  bool step_reasoning(std::vector<ChatDelta>& out);
  bool step_content(std::vector<ChatDelta>& out);
  bool step_tool_block(std::vector<ChatDelta>& out);
  bool stream_hermes_call(size_t close, std::vector<ChatDelta>& out);
  bool step_mistral_calls();
  bool step_mistral_head(std::vector<ChatDelta>& out);
  bool mistral_call_whole(std::vector<ChatDelta>& out);
  bool step_json_calls(std::vector<ChatDelta>& out);
  void json_calls_failed(std::vector<ChatDelta>& out);
  bool step_call_arguments(std::vector<ChatDelta>& out);
  bool step_call_end();
  void step_forced(std::vector<ChatDelta>& out);
  // Reports what a call reader found; false for a call read whole that does
  // not parse (left to the caller).
  bool take_call_event(CallObjectReader::Event& e, std::vector<ChatDelta>& out);
  // Starts reading calls in `mode`, after their marker.
  void enter_calls(Mode mode);
  void finish_json_calls(const std::string& rest, std::vector<ChatDelta>& out);

  void emit_text(ChatDelta::Kind kind, std::string text, std::vector<ChatDelta>& out);
  // Turns `calls` into deltas, or gives `raw` back as content when they do not parse.
  void emit_calls_or_content(bool parsed, std::vector<ToolCall> calls, const std::string& raw,
                             std::vector<ChatDelta>& out);
  void emit_arguments(std::string text, std::vector<ChatDelta>& out);
  // The tool-call markers this format's output may hold.
  std::vector<std::string_view> tool_markers() const;
  // Calls are parsed whole from here on: the output has ended and no grammar forces them.
  bool whole() const { return ended_ && !forced_; }

  ChatFormat format_;
  bool parse_tools_;
  bool forced_;
  ForcedCallStream forced_calls_;
  std::function<std::string()> new_id_;
  Mode mode_ = Mode::kStart;
  bool ended_ = false;   // finish(): no text follows pending_
  std::string pending_;  // text not yet decided
  // The text that opened the current call (whitespace before it and its
  // marker), given back as content if the call is malformed.
  std::string tail_open_;
  size_t searched_ = 0;  // kToolBlock: pending_ before this holds no closing marker
  // The call being read: kToolBlock (its head, from pending_[0] up to
  // read_), kJsonCalls (its head or the whole of one read whole), kCallArguments.
  std::optional<CallObjectReader> call_;
  size_t read_ = 0;
  bool head_failed_ = false;  // kToolBlock: the call is decided at its closing marker
  Mode after_call_ = Mode::kContent;
  // kJsonCalls: the text read since the last call reported (all of it when
  // none was, to be parsed whole if the output ends first).
  std::string calls_text_;
  bool reported_any_ = false;  // kJsonCalls: a call of these was reported
  ParsedMessage message_;
};

// Parses the calls of one output fragment in `style`; false when it is not
// a well-formed call (or list of calls). Exposed for tests.
bool parse_hermes_call(std::string_view body, ToolCall& out);
bool parse_json_calls(std::string_view text, std::vector<ToolCall>& out);

}  // namespace duet::server
