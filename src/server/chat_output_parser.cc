#include "server/chat_output_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/json_depth.h"

namespace duet::server {

using Json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
// Deeper JSON than any tool's arguments need; the bound keeps a hostile
// output from recursing through the JSON library's printer.
constexpr int kMaxJsonDepth = 64;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool all_space(std::string_view s) { return trim(s).empty(); }

// Where the JSON value starting at s[0] ('{' or '[') ends (one past its
// closing bracket), or npos when it does not end in `s` or nests too deep.
size_t json_value_end(std::string_view s) {
  JsonDepth d;
  for (size_t i = 0; i < s.size(); ++i) {
    const int before = d.depth;
    d.step(s[i]);
    if (d.depth > kMaxJsonDepth) return std::string_view::npos;
    if (d.depth == 0 && before == 1) return i + 1;
  }
  return std::string_view::npos;
}

// `s` as one JSON value, provided it is a single bracketed value not too deep.
bool parse_bounded(std::string_view s, Json& out) {
  s = trim(s);
  if (s.empty() || (s[0] != '{' && s[0] != '[') || json_value_end(s) != s.size()) return false;
  out = Json::parse(s, nullptr, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

// {"name": "...", "arguments": {...}} (or "parameters", Llama's word; or the
// arguments as a string holding the object, as OpenAI writes them).
bool call_from_json(const Json& j, ToolCall& out) {
  if (!j.is_object()) return false;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end()) return false;
  Json parsed;
  const Json* obj = &*args;
  if (args->is_string()) {
    if (!parse_bounded(args->get<std::string>(), parsed)) return false;
    obj = &parsed;
  }
  if (!obj->is_object()) return false;
  out.name = name->get<std::string>();
  out.arguments = obj->dump();
  return true;
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

}  // namespace

bool parse_hermes_call(std::string_view body, ToolCall& out) {
  Json j;
  return parse_bounded(body, j) && call_from_json(j, out);
}

bool parse_json_calls(std::string_view text, std::vector<ToolCall>& out) {
  text = trim(text);
  if (!text.empty() && text[0] == '[') {
    Json arr;
    if (!parse_bounded(text, arr) || !arr.is_array() || arr.empty()) return false;
    for (const Json& j : arr) {
      ToolCall c;
      if (!call_from_json(j, c)) return false;
      out.push_back(std::move(c));
    }
    return true;
  }
  // One object, or several separated by ';' (Llama 3.x's parallel calls).
  while (!text.empty()) {
    if (text[0] != '{') return false;
    const size_t end = json_value_end(text);
    Json j;
    ToolCall c;
    if (end == std::string_view::npos || !parse_bounded(text.substr(0, end), j) || !call_from_json(j, c))
      return false;
    out.push_back(std::move(c));
    text = trim(text.substr(end));
    if (!text.empty() && text[0] == ';') text = trim(text.substr(1));
  }
  return !out.empty();
}

ChatOutputParser::ChatOutputParser(ChatFormat format, bool parse_tools, std::function<std::string()> new_id,
                                   bool forced)
    : format_(std::move(format)), parse_tools_(parse_tools), forced_(parse_tools && forced), new_id_(std::move(new_id)) {
  if (format_.starts_in_reasoning && !format_.think_close.empty()) mode_ = Mode::kReasoning;
}

std::vector<std::string_view> ChatOutputParser::tool_markers() const {
  if (!parse_tools_) return {};
  switch (format_.tools) {
    case ToolCallStyle::kHermes: return {kHermesOpen};
    case ToolCallStyle::kMistral: return {kMistralOpen};
    case ToolCallStyle::kLlama3: return {kPythonTag};
  }
  return {};
}

void ChatOutputParser::emit_text(ChatDelta::Kind kind, std::string text, std::vector<ChatDelta>& out) {
  if (text.empty()) return;
  (kind == ChatDelta::kReasoning ? message_.reasoning : message_.content) += text;
  ChatDelta d;
  d.kind = kind;
  d.text = std::move(text);
  out.push_back(std::move(d));
}

void ChatOutputParser::emit_calls_or_content(bool parsed, std::vector<ToolCall> calls, const std::string& raw,
                                             std::vector<ChatDelta>& out) {
  if (!parsed) return emit_text(ChatDelta::kContent, raw, out);
  for (ToolCall& c : calls) {
    c.id = new_id_();
    ChatDelta d;
    d.kind = ChatDelta::kToolCall;
    d.index = static_cast<int>(message_.tool_calls.size());
    d.call = c;
    message_.tool_calls.push_back(std::move(c));
    out.push_back(std::move(d));
  }
}

std::vector<ChatDelta> ChatOutputParser::feed(std::string_view text) {
  pending_.append(text);
  std::vector<ChatDelta> out;
  while (!pending_.empty() && step(out)) {
  }
  return out;
}

bool ChatOutputParser::step(std::vector<ChatDelta>& out) {
  switch (mode_) {
    case Mode::kStart:
    case Mode::kAfterReasoning: return step_start(out);
    case Mode::kReasoning: return step_reasoning(out);
    case Mode::kContent: return step_content(out);
    case Mode::kToolBlock: return step_tool_block(out);
    case Mode::kToolTail: return false;  // the rest of the output is the calls
    case Mode::kForcedCalls: step_forced(out); return false;
  }
  return false;
}

// Before any content: a reasoning block may open, and a Llama 3 reply may be
// a bare JSON call. Whitespace waits to see what follows it.
bool ChatOutputParser::step_start(std::vector<ChatDelta>& out) {
  const std::string_view rest = trim(pending_);
  if (rest.empty()) return false;
  const size_t skipped = static_cast<size_t>(rest.data() - pending_.data());
  const bool may_reason = mode_ == Mode::kStart && !format_.think_open.empty();
  if (may_reason && rest.starts_with(format_.think_open)) {
    pending_.erase(0, skipped + format_.think_open.size());
    mode_ = Mode::kReasoning;
    return true;
  }
  if (may_reason && std::string_view(format_.think_open).starts_with(rest)) return false;
  if (parse_tools_ && format_.tools == ToolCallStyle::kLlama3 && rest[0] == '{') {
    tail_open_ = pending_.substr(0, skipped);
    pending_.erase(0, skipped);
    mode_ = forced_ ? Mode::kForcedCalls : Mode::kToolTail;
    return true;
  }
  // Whitespace after a reasoning block only separates it from the reply.
  if (mode_ == Mode::kAfterReasoning) pending_.erase(0, skipped);
  mode_ = Mode::kContent;
  return true;
}

bool ChatOutputParser::step_reasoning(std::vector<ChatDelta>& out) {
  const size_t close = pending_.find(format_.think_close);
  if (close != std::string::npos) {
    emit_text(ChatDelta::kReasoning, pending_.substr(0, close), out);
    pending_.erase(0, close + format_.think_close.size());
    mode_ = Mode::kAfterReasoning;
    return true;
  }
  const size_t hold = partial_marker(pending_, format_.think_close);
  emit_text(ChatDelta::kReasoning, pending_.substr(0, pending_.size() - hold), out);
  pending_.erase(0, pending_.size() - hold);
  return false;
}

// Content up to the next tool-call marker. With tools, trailing whitespace
// waits too: before a call (or at the end after one) it is dropped.
bool ChatOutputParser::step_content(std::vector<ChatDelta>& out) {
  size_t at = std::string::npos;
  std::string_view marker;
  for (std::string_view m : tool_markers()) {
    const size_t p = pending_.find(m);
    if (p < at) at = p, marker = m;
  }
  if (at != std::string::npos) {
    std::string_view before = std::string_view(pending_).substr(0, at);
    size_t text_end = before.size();
    while (text_end > 0 && is_space(before[text_end - 1])) --text_end;
    emit_text(ChatDelta::kContent, std::string(before.substr(0, text_end)), out);
    // Kept for a call that turns out malformed: then it is content again.
    tail_open_ = std::string(before.substr(text_end)) + std::string(marker);
    pending_.erase(0, at + marker.size());
    mode_ = forced_ ? Mode::kForcedCalls : marker == kHermesOpen ? Mode::kToolBlock : Mode::kToolTail;
    return true;
  }
  size_t keep = 0;
  for (std::string_view m : tool_markers()) keep = std::max(keep, partial_marker(pending_, m));
  size_t end = pending_.size() - keep;
  if (parse_tools_)
    while (end > 0 && is_space(pending_[end - 1])) --end;
  emit_text(ChatDelta::kContent, pending_.substr(0, end), out);
  pending_.erase(0, end);
  return false;
}

bool ChatOutputParser::step_tool_block(std::vector<ChatDelta>& out) {
  // Searched from where the last search could not have missed a match, so
  // a long call costs linear time, not a rescan per token.
  const size_t close = pending_.find(kHermesClose, searched_);
  if (close == std::string::npos) {
    searched_ = pending_.size() >= kHermesClose.size() ? pending_.size() - kHermesClose.size() + 1 : 0;
    return false;
  }
  searched_ = 0;
  const std::string body = pending_.substr(0, close);
  ToolCall call;
  const bool ok = parse_hermes_call(body, call);
  emit_calls_or_content(ok, {call}, tail_open_ + body + std::string(kHermesClose), out);
  pending_.erase(0, close + kHermesClose.size());
  mode_ = Mode::kContent;
  return true;
}

void ChatOutputParser::step_forced(std::vector<ChatDelta>& out) {
  std::vector<ForcedCallStream::Event> events;
  forced_calls_.feed(pending_, events);
  pending_.clear();
  take_forced(events, out);
}

void ChatOutputParser::take_forced(std::vector<ForcedCallStream::Event>& events, std::vector<ChatDelta>& out) {
  for (ForcedCallStream::Event& e : events) {
    if (e.kind == ForcedCallStream::Event::kWhole) {
      ToolCall call;
      const bool ok = parse_hermes_call(e.text, call);
      emit_calls_or_content(ok, {call}, e.text, out);
    } else if (e.kind == ForcedCallStream::Event::kHead) {
      emit_calls_or_content(true, {ToolCall{"", std::move(e.text), ""}}, "", out);
    } else if (!message_.tool_calls.empty()) {
      message_.tool_calls.back().arguments += e.text;
      ChatDelta d;
      d.kind = ChatDelta::kToolCallArguments;
      d.index = static_cast<int>(message_.tool_calls.size()) - 1;
      d.text = std::move(e.text);
      out.push_back(std::move(d));
    }
  }
}

std::vector<ChatDelta> ChatOutputParser::finish() {
  std::vector<ChatDelta> out;
  const std::string rest = std::move(pending_);
  pending_.clear();
  switch (mode_) {
    case Mode::kReasoning: emit_text(ChatDelta::kReasoning, rest, out); break;
    case Mode::kToolBlock: {
      // Unclosed (the output ran out): a complete call inside still counts.
      ToolCall call;
      const bool ok = parse_hermes_call(rest, call);
      emit_calls_or_content(ok, {call}, tail_open_ + rest, out);
      break;
    }
    case Mode::kToolTail: {
      std::vector<ToolCall> calls;
      std::string_view body = rest;
      if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
      const bool ok = parse_json_calls(body, calls);
      emit_calls_or_content(ok, std::move(calls), tail_open_ + rest, out);
      break;
    }
    case Mode::kForcedCalls:
      // A call cut before its arguments began is no call.
      emit_text(ChatDelta::kContent, forced_calls_.finish(), out);
      break;
    case Mode::kAfterReasoning:
      emit_text(ChatDelta::kContent, std::string(trim(rest).empty() ? std::string_view() : rest), out);
      break;
    case Mode::kStart:
    case Mode::kContent:
      // Whitespace that only trailed (or separated) tool calls is not a reply.
      if (!(message_.tool_calls.size() > 0 && all_space(rest))) emit_text(ChatDelta::kContent, rest, out);
      break;
  }
  mode_ = Mode::kContent;
  return out;
}

}  // namespace duet::server
