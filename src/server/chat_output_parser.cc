#include "server/chat_output_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json_parse.h"
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

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
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
  auto parsed = parse_json<Json>(s);
  if (!parsed.ok()) return false;
  out = std::move(*parsed);
  return true;
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
    case ToolCallStyle::kMistral:
    case ToolCallStyle::kMistralArgs: return {kMistralOpen};
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

void ChatOutputParser::emit_arguments(std::string text, std::vector<ChatDelta>& out) {
  if (text.empty() || message_.tool_calls.empty()) return;
  message_.tool_calls.back().arguments += text;
  ChatDelta d;
  d.kind = ChatDelta::kToolCallArguments;
  d.index = static_cast<int>(message_.tool_calls.size()) - 1;
  d.text = std::move(text);
  out.push_back(std::move(d));
}

bool ChatOutputParser::take_call_event(CallObjectReader::Event& e, std::vector<ChatDelta>& out) {
  switch (e.kind) {
    case CallObjectReader::Event::kHead:
      emit_calls_or_content(true, {ToolCall{"", std::move(e.text), ""}}, "", out);
      return true;
    case CallObjectReader::Event::kArguments: emit_arguments(std::move(e.text), out); return true;
    case CallObjectReader::Event::kWhole: {
      ToolCall call;
      if (!parse_hermes_call(e.text, call)) return false;
      emit_calls_or_content(true, {call}, "", out);
      return true;
    }
  }
  return false;
}

void ChatOutputParser::enter_calls(Mode mode) {
  mode_ = mode;
  call_.reset();
  read_ = 0;
  searched_ = 0;
  head_failed_ = false;
  calls_text_.clear();
  reported_any_ = false;
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
    case Mode::kMistralCalls: return step_mistral_calls();
    case Mode::kMistralHead: return step_mistral_head(out);
    case Mode::kJsonCalls: return step_json_calls(out);
    case Mode::kCallArguments: return step_call_arguments(out);
    case Mode::kCallEnd: return step_call_end();
    case Mode::kTextTail:
      emit_text(ChatDelta::kContent, std::move(pending_), out);
      pending_.clear();
      return false;
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
    enter_calls(forced_ ? Mode::kForcedCalls : Mode::kJsonCalls);
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
    while (text_end > 0 && is_json_space(before[text_end - 1])) --text_end;
    emit_text(ChatDelta::kContent, std::string(before.substr(0, text_end)), out);
    // Kept for a call that turns out malformed: then it is content again.
    tail_open_ = std::string(before.substr(text_end)) + std::string(marker);
    pending_.erase(0, at + marker.size());
    if (forced_ && format_.tools != ToolCallStyle::kMistralArgs) enter_calls(Mode::kForcedCalls);
    else if (marker == kHermesOpen) enter_calls(Mode::kToolBlock);
    else if (marker == kMistralOpen) enter_calls(Mode::kMistralCalls);
    else enter_calls(Mode::kJsonCalls);
    return true;
  }
  size_t keep = 0;
  for (std::string_view m : tool_markers()) keep = std::max(keep, partial_marker(pending_, m));
  size_t end = pending_.size() - keep;
  if (parse_tools_)
    while (end > 0 && is_json_space(pending_[end - 1])) --end;
  emit_text(ChatDelta::kContent, pending_.substr(0, end), out);
  pending_.erase(0, end);
  return false;
}

// A Hermes block: its call streams once its head is read; one whose head
// does not read in order (or any, once the output has ended) is decided
// whole at the closing marker, as content if it does not parse.
bool ChatOutputParser::step_tool_block(std::vector<ChatDelta>& out) {
  // Searched from where the last search could not have missed a match, so
  // a long call costs linear time, not a rescan per token.
  const size_t close = pending_.find(kHermesClose, searched_);
  if (!whole() && stream_hermes_call(close, out)) return true;
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

// Reads the block's call object up to `close` (where the block's closing
// marker is, if it came); true once its head is read and reported.
bool ChatOutputParser::stream_hermes_call(size_t close, std::vector<ChatDelta>& out) {
  if (head_failed_) return false;
  const size_t end = close == std::string::npos ? pending_.size() : close;
  if (!call_) {
    size_t i = 0;
    while (i < end && is_json_space(pending_[i])) ++i;
    if (i == end) return false;
    if (pending_[i] != '{') {
      head_failed_ = true;
      return false;
    }
    call_.emplace(CallObjectReader::Shape::kCall, /*minify=*/!forced_);
    read_ = i;
  }
  if (read_ > end) {
    // The closing marker came within what was read as a head (a name
    // holding it): the block is decided whole.
    head_failed_ = true;
    call_.reset();
    return false;
  }
  std::vector<CallObjectReader::Event> events;
  read_ += call_->feed(std::string_view(pending_).substr(read_, end - read_), events);
  if (!call_->reported_head()) {
    if (!call_->reading_head()) {
      head_failed_ = true;
      call_.reset();
    }
    return false;
  }
  pending_.erase(0, read_);
  read_ = 0;
  for (CallObjectReader::Event& e : events) take_call_event(e, out);
  after_call_ = Mode::kCallEnd;
  mode_ = Mode::kCallArguments;
  return true;
}

// A reported call's arguments, read to their end.
bool ChatOutputParser::step_call_arguments(std::vector<ChatDelta>& out) {
  if (!call_->done()) {
    std::vector<CallObjectReader::Event> events;
    pending_.erase(0, call_->feed(pending_, events));
    for (CallObjectReader::Event& e : events) take_call_event(e, out);
    if (!call_->done()) return false;
  }
  call_.reset();
  mode_ = after_call_;
  return true;
}

// After a streamed Hermes call's object: whitespace and the closing marker.
// Anything else is the reply's text again.
bool ChatOutputParser::step_call_end() {
  size_t i = 0;
  while (i < pending_.size() && is_json_space(pending_[i])) ++i;
  pending_.erase(0, i);
  if (pending_.starts_with(kHermesClose)) {
    pending_.erase(0, kHermesClose.size());
  } else if (kHermesClose.starts_with(pending_)) {
    return false;
  }
  mode_ = Mode::kContent;
  return true;
}

// After [TOOL_CALLS]: a JSON list (or object) of calls, or name[ARGS]{...}.
bool ChatOutputParser::step_mistral_calls() {
  const std::string_view rest = trim(pending_);
  if (rest.empty()) return false;
  mode_ = rest[0] == '[' || rest[0] == '{' ? Mode::kJsonCalls : Mode::kMistralHead;
  return true;
}

bool ChatOutputParser::step_mistral_head(std::vector<ChatDelta>& out) {
  if (whole()) return mistral_call_whole(out);
  std::string name;
  size_t len = 0;
  const HeadMatch m = read_mistral_head(pending_, name, len);
  if (m == HeadMatch::kMore) return false;
  if (m == HeadMatch::kNo) {
    // Not a call: the marker is text, and what follows is read again as the reply's.
    emit_text(ChatDelta::kContent, std::move(tail_open_), out);
    tail_open_.clear();
    mode_ = Mode::kContent;
    return true;
  }
  pending_.erase(0, len);
  emit_calls_or_content(true, {ToolCall{"", std::move(name), ""}}, "", out);
  call_.emplace(CallObjectReader::Shape::kArguments, /*minify=*/!forced_);
  after_call_ = Mode::kContent;
  mode_ = Mode::kCallArguments;
  return true;
}

// The output has ended: name[ARGS]{...} parsed whole, or the marker is text.
bool ChatOutputParser::mistral_call_whole(std::vector<ChatDelta>& out) {
  std::string name;
  size_t len = 0, end = std::string::npos;
  Json args;
  if (read_mistral_head(pending_, name, len) == HeadMatch::kDone) {
    end = json_value_end(std::string_view(pending_).substr(len));
    if (end != std::string::npos && !(parse_bounded(pending_.substr(len, end), args) && args.is_object()))
      end = std::string::npos;
  }
  mode_ = Mode::kContent;
  if (end == std::string::npos) {
    emit_text(ChatDelta::kContent, std::move(tail_open_), out);
    tail_open_.clear();
    return true;
  }
  emit_calls_or_content(true, {ToolCall{"", std::move(name), args.dump()}}, "", out);
  pending_.erase(0, len + end);
  return true;
}

// Llama 3 and older Mistral calls: JSON call objects to the end of the
// output, between brackets, commas, semicolons and whitespace. Each streams
// as it is read; text that is no call makes the rest content.
bool ChatOutputParser::step_json_calls(std::vector<ChatDelta>& out) {
  if (whole() && !reported_any_) return false;  // parsed whole at finish()
  if (!call_) {
    size_t i = 0;
    while (i < pending_.size() && (is_json_space(pending_[i]) || std::string_view("[],;").find(pending_[i]) != std::string_view::npos))
      ++i;
    calls_text_.append(pending_, 0, i);
    pending_.erase(0, i);
    if (pending_.empty()) return false;
    if (pending_[0] != '{') {
      json_calls_failed(out);
      return true;
    }
    call_.emplace(CallObjectReader::Shape::kCall, /*minify=*/!forced_);
  }
  std::vector<CallObjectReader::Event> events;
  const size_t n = call_->feed(pending_, events);
  calls_text_.append(pending_, 0, n);
  pending_.erase(0, n);
  for (CallObjectReader::Event& e : events) {
    if (!take_call_event(e, out)) {
      json_calls_failed(out);
      return true;
    }
  }
  if (call_->reported_head() || call_->done()) {
    reported_any_ = true;
    calls_text_.clear();
  }
  if (call_->done()) {
    call_.reset();
  } else if (call_->reported_head()) {
    after_call_ = Mode::kJsonCalls;
    mode_ = Mode::kCallArguments;
  }
  return true;
}

// Not calls after all: what was read since the last call (from the marker
// when there was none) is content, and so is the rest of the output.
void ChatOutputParser::json_calls_failed(std::vector<ChatDelta>& out) {
  emit_text(ChatDelta::kContent, (reported_any_ ? std::string() : tail_open_) + calls_text_, out);
  calls_text_.clear();
  call_.reset();
  mode_ = Mode::kTextTail;
}

// The JSON calls of an output that ended before any was reported, parsed
// whole: all calls, or all content.
void ChatOutputParser::finish_json_calls(const std::string& rest, std::vector<ChatDelta>& out) {
  std::vector<ToolCall> calls;
  std::string_view body = rest;
  if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
  const bool ok = parse_json_calls(body, calls);
  emit_calls_or_content(ok, std::move(calls), tail_open_ + rest, out);
}

void ChatOutputParser::step_forced(std::vector<ChatDelta>& out) {
  std::vector<ForcedCallStream::Event> events;
  forced_calls_.feed(pending_, events);
  pending_.clear();
  for (ForcedCallStream::Event& e : events)
    if (!take_call_event(e, out)) emit_text(ChatDelta::kContent, std::move(e.text), out);
}

std::vector<ChatDelta> ChatOutputParser::finish(std::string_view text) {
  ended_ = true;
  std::vector<ChatDelta> out = feed(text);
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
    case Mode::kMistralCalls:
    case Mode::kJsonCalls:
      if (!reported_any_) finish_json_calls(calls_text_ + rest, out);
      // A call cut before its arguments began is no call.
      else if (call_) emit_text(ChatDelta::kContent, call_->unreported(), out);
      break;
    case Mode::kMistralHead: emit_text(ChatDelta::kContent, tail_open_ + rest, out); break;
    case Mode::kCallArguments:  // cut short: the arguments as far as they came
    case Mode::kCallEnd: break;
    case Mode::kTextTail: emit_text(ChatDelta::kContent, rest, out); break;
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
  call_.reset();
  mode_ = Mode::kContent;
  return out;
}

}  // namespace duet::server
