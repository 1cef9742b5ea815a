// Parsing and validating the bodies of POST /v1/completions and
// /v1/chat/completions. Strict: wrong types, out-of-range values and unknown
// fields are 400s naming the field. Besides OpenAI's fields, vLLM's sampling
// extensions top_k, min_p, repetition_penalty and ignore_eos are accepted.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"
#include "server/chat_format.h"
#include "server/chat_tools.h"
#include "tokenizer/chat_template.h"

namespace duet::server {

struct GenerateRequest {
  bool chat = false;
  std::string model;
  std::string prompt;                 // completions: prompt text
  std::vector<int32_t> prompt_ids;    // completions: prompt given as token ids
  bool prompt_is_ids = false;
  bool echo = false;                  // completions: each choice's text starts with the prompt's
  // Completions: the text after the one to generate; the prompt becomes the
  // model's fill-in-the-middle prompt (prompt_builder.h).
  std::optional<std::string> suffix;
  std::vector<ChatMessage> messages;  // chat
  // chat: the messages as the template reads them (chat_messages.h), the
  // tools, and chat_template_kwargs (further template variables).
  nlohmann::ordered_json template_messages;
  ChatTools tools;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // chat: how the reply is written, set once the prompt is rendered.
  ChatFormat format;
  std::optional<int32_t> max_tokens;
  bool stream = false;
  bool include_usage = false;
  // Completions: top alternatives per token (0-5); chat: logprobs true and
  // top_logprobs alternatives (0-20). -1: off.
  int32_t logprobs = -1;
  // Sampling (logit_bias included: its ids are checked against the
  // vocabulary later), stop, ignore_eos, n (its cap is checked later);
  // max_tokens is set later.
  RequestParams params;
};

// Fills `out` from the JSON body; the error names the first problem.
// `raw_body` (the text `body` came from), when given, lets a JSON Schema
// keep its properties in the order the client wrote them.
//
// Constrained output: `grammar` (GBNF text, llama.cpp's field) or
// `response_format` {"type": "json_object"} (any object; llama.cpp's
// optional "schema" inside it too) or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}}, on both
// endpoints. A grammar that does not parse or a schema duet cannot compile
// is a 400 naming the problem (for schemas, the JSON pointer).
//
// n (choices), logit_bias ({"token id": bias in [-100, 100]}), and on
// completions echo (not with logprobs) and suffix.
//
// Chat also takes tools, tool_choice and parallel_tool_calls (chat_tools.h),
// messages with tool calls and tool results, and chat_template_kwargs.
// `ordered` is the same body in the client's key order.
std::optional<ApiError> parse_generate_request(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                               bool chat, GenerateRequest& out);

// The same from the body's text as it came off the wire: what the server
// runs on every request, with no HTTP around it (fuzz/fuzz_openai_request.cc).
std::optional<ApiError> parse_generate_body(std::string_view body, bool chat, GenerateRequest& out);

}  // namespace duet::server
