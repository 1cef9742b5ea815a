// A chat request's tools: the `tools` array, `tool_choice` and
// `parallel_tool_calls` as OpenAI defines them, checked; and the grammar
// that forces a tool call in the model's format when the choice requires
// one (tool_choice "required" or a named function).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "grammar/grammar.h"
#include "server/api_error.h"
#include "server/chat_format.h"

namespace duet::server {

struct ChatTools {
  enum class Choice { kAuto, kNone, kRequired, kNamed };
  // [{"type": "function", "function": {"name", "description", "parameters"}}],
  // in the client's key order (templates print them with tojson).
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  Choice choice = Choice::kAuto;
  std::string named;  // kNamed: the function
  bool parallel = true;

  bool any() const { return !tools.empty(); }
  // The model is shown the tools and its output searched for calls.
  bool offered() const { return any() && choice != Choice::kNone; }
  // The output must be tool calls (grammar-forced).
  bool forced() const { return any() && (choice == Choice::kRequired || choice == Choice::kNamed); }
};

// Reads tools, tool_choice and parallel_tool_calls from a chat body; a 400
// names the field and the tool at fault. Without tools, tool_choice may
// only be "none" or "auto", as OpenAI rules.
std::optional<ApiError> read_chat_tools(const nlohmann::ordered_json& body, ChatTools& out);

// The grammar of what a model writing `style` outputs when it must call
// (one of) the chosen tools: their names, and arguments that follow each
// function's parameters schema. With parallel calls, up to kMaxParallelCalls.
// An error names the tool whose schema cannot be compiled. `prefix` comes
// first (the end of a reasoning block the prompt opened).
constexpr int kMaxParallelCalls = 8;
Result<std::shared_ptr<const Grammar>> tool_call_grammar(const ChatTools& tools, ToolCallStyle style,
                                                         std::string_view prefix = {});

// A fresh id for a call: nine letters and digits (what Mistral's templates
// insist on; any client takes it).
std::string new_tool_call_id();

}  // namespace duet::server
