#include "server/chat_messages.h"

#include <set>

#include "core/json_parse.h"

namespace duet::server {

using Json = nlohmann::ordered_json;

namespace {

// A string, or OpenAI's list of text parts joined.
std::optional<ApiError> read_content(const Json& c, const std::string& where, std::string& out) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return invalid("'" + where + ".content' must be a string or an array of text parts", where + ".content");
  for (const Json& part : c) {
    const bool text = part.is_object() && part.contains("type") && part["type"] == "text" && part.contains("text") &&
                      part["text"].is_string();
    if (!text)
      return invalid("'" + where + ".content' parts must be {\"type\": \"text\", \"text\": ...}", where + ".content");
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

// {"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}
std::optional<ApiError> read_tool_call(const Json& c, const std::string& where, Json& out) {
  const bool shaped = c.is_object() && c.contains("id") && c["id"].is_string() && c.contains("function") &&
                      c["function"].is_object() && c["function"].contains("name") &&
                      c["function"]["name"].is_string() && c["function"].contains("arguments") &&
                      c["function"]["arguments"].is_string() && (!c.contains("type") || c["type"] == "function");
  if (!shaped)
    return invalid("'" + where + "' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}} "
                   "with string values", where);
  // Templates print arguments with tojson, so they get the object when the
  // text is one (a JSON string of it would be printed quoted).
  const std::string& text = c["function"]["arguments"].get_ref<const std::string&>();
  auto parsed = parse_json<Json>(text);
  Json args = parsed.ok() && parsed->is_object() ? std::move(*parsed) : Json(text);
  out = {{"id", c["id"]},
         {"type", "function"},
         {"function", {{"name", c["function"]["name"]}, {"arguments", std::move(args)}}}};
  return std::nullopt;
}

std::optional<ApiError> read_message(const Json& m, const std::string& where, ChatMessage& plain, Json& tmpl) {
  if (!m.is_object()) return invalid("'" + where + "' must be an object", where);
  static const std::set<std::string> kKnown = {"role", "content", "name", "tool_calls", "tool_call_id",
                                               "reasoning_content", "refusal"};
  for (auto it = m.begin(); it != m.end(); ++it)
    if (!kKnown.count(it.key())) return invalid("unknown field '" + it.key() + "' in " + where, where + "." + it.key());
  const auto present = [&](const char* k) { return m.contains(k) && !m[k].is_null(); };
  if (!present("role") || !m["role"].is_string()) return invalid("'" + where + ".role' must be a string", where + ".role");
  plain.role = m["role"].get<std::string>();
  if (plain.role == "developer") plain.role = "system";
  if (plain.role != "system" && plain.role != "user" && plain.role != "assistant" && plain.role != "tool")
    return invalid("'" + where + ".role' must be system, user, assistant or tool (got '" + plain.role + "')",
                   where + ".role");
  const bool assistant = plain.role == "assistant", tool = plain.role == "tool";
  if ((present("tool_calls") || present("reasoning_content")) && !assistant)
    return invalid("only assistant messages carry tool_calls or reasoning_content", where);
  if (present("tool_call_id") != tool)
    return invalid(tool ? "'" + where + ".tool_call_id' is required for a tool message"
                        : "only tool messages carry tool_call_id", where + ".tool_call_id");
  if (present("tool_call_id") && !m["tool_call_id"].is_string())
    return invalid("'" + where + ".tool_call_id' must be a string", where + ".tool_call_id");

  tmpl = {{"role", plain.role}};
  Json calls = Json::array();
  if (present("tool_calls")) {
    if (!m["tool_calls"].is_array()) return invalid("'" + where + ".tool_calls' must be an array", where + ".tool_calls");
    for (size_t i = 0; i < m["tool_calls"].size(); ++i) {
      Json c;
      if (auto e = read_tool_call(m["tool_calls"][i], where + ".tool_calls[" + std::to_string(i) + "]", c)) return e;
      calls.push_back(std::move(c));
    }
  }
  if (present("content")) {
    if (auto e = read_content(m["content"], where, plain.content)) return e;
  } else if (!(assistant && !calls.empty())) {
    return invalid("'" + where + ".content' is required", where + ".content");
  }
  // Templates test content as a string even beside tool calls.
  tmpl["content"] = plain.content;
  if (!calls.empty()) tmpl["tool_calls"] = std::move(calls);
  if (tool) tmpl["tool_call_id"] = m["tool_call_id"];
  if (present("reasoning_content")) {
    if (!m["reasoning_content"].is_string())
      return invalid("'" + where + ".reasoning_content' must be a string", where + ".reasoning_content");
    tmpl["reasoning_content"] = m["reasoning_content"];
  }
  if (present("name")) {
    if (!m["name"].is_string()) return invalid("'" + where + ".name' must be a string", where + ".name");
    tmpl["name"] = m["name"];
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_chat_messages(const Json& body, std::vector<ChatMessage>& plain, Json& for_template) {
  const auto v = body.find("messages");
  if (v == body.end() || v->is_null()) return invalid("'messages' is required", "messages");
  if (!v->is_array() || v->empty()) return invalid("'messages' must be a non-empty array", "messages");
  for_template = Json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    ChatMessage msg;
    Json tmpl;
    if (auto e = read_message((*v)[i], "messages[" + std::to_string(i) + "]", msg, tmpl)) return e;
    plain.push_back(std::move(msg));
    for_template.push_back(std::move(tmpl));
  }
  return std::nullopt;
}

}  // namespace duet::server
