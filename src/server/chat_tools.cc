#include "server/chat_tools.h"

#include <random>
#include <set>

#include "grammar/json_schema.h"

namespace duet::server {

using Json = nlohmann::ordered_json;

namespace {

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// The shape every JSON Schema has whatever duet's grammar supports: caught
// for every request with tools, not only those whose calls are forced.
std::optional<std::string> schema_shape_problem(const Json& p) {
  if (!p.is_object()) return "must be a JSON Schema object";
  if (auto t = p.find("type"); t != p.end()) {
    bool ok = t->is_string();
    if (t->is_array()) {
      ok = true;
      for (const Json& x : *t) ok = ok && x.is_string();
    }
    if (!ok) return "'type' must be a string or an array of strings";
  }
  if (auto pr = p.find("properties"); pr != p.end() && !pr->is_object()) return "'properties' must be an object";
  if (auto r = p.find("required"); r != p.end()) {
    bool ok = r->is_array();
    if (ok)
      for (const Json& x : *r) ok = ok && x.is_string();
    if (!ok) return "'required' must be an array of strings";
  }
  return std::nullopt;
}

std::optional<ApiError> read_tool(const Json& t, size_t i, std::set<std::string>& names) {
  const std::string where = "tools[" + std::to_string(i) + "]";
  if (!t.is_object()) return invalid("'" + where + "' must be an object", where);
  const auto type = t.find("type");
  if (type == t.end() || !type->is_string() || type->get<std::string>() != "function")
    return invalid("'" + where + ".type' must be \"function\"", where + ".type");
  const auto fn = t.find("function");
  if (fn == t.end() || !fn->is_object()) return invalid("'" + where + ".function' must be an object", where + ".function");
  const auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || !valid_function_name(name->get<std::string>()))
    return invalid("'" + where + ".function.name' must be 1-64 letters, digits, '_' or '-'", where + ".function.name");
  if (!names.insert(name->get<std::string>()).second)
    return invalid("two tools are named '" + name->get<std::string>() + "'", where + ".function.name");
  if (auto d = fn->find("description"); d != fn->end() && !d->is_string() && !d->is_null())
    return invalid("'" + where + ".function.description' must be a string", where + ".function.description");
  if (auto s = fn->find("strict"); s != fn->end() && !s->is_boolean() && !s->is_null())
    return invalid("'" + where + ".function.strict' must be a boolean", where + ".function.strict");
  if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
    if (auto problem = schema_shape_problem(*p))
      return invalid("the parameters schema of tool '" + name->get<std::string>() + "' (" + where + ") " + *problem,
                     where + ".function.parameters");
  }
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(const Json& c, ChatTools& out) {
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "auto") out.choice = ChatTools::Choice::kAuto;
    else if (s == "none") out.choice = ChatTools::Choice::kNone;
    else if (s == "required") out.choice = ChatTools::Choice::kRequired;
    else return invalid("'tool_choice' must be \"none\", \"auto\", \"required\" or a function, not '" + s + "'", "tool_choice");
    return std::nullopt;
  }
  const bool shaped = c.is_object() && c.contains("function") && c["function"].is_object() &&
                      c["function"].contains("name") && c["function"]["name"].is_string() &&
                      (!c.contains("type") || c["type"] == "function");
  if (!shaped)
    return invalid("'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                   "tool_choice");
  out.choice = ChatTools::Choice::kNamed;
  out.named = c["function"]["name"].get<std::string>();
  return std::nullopt;
}

const Json* field(const Json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// Points every local $ref of a schema moved to `base` (a JSON pointer
// fragment) at its new place, so a tool's own $defs still resolve once its
// schema is nested in the call's.
void rebase_refs(Json& s, const std::string& base) {
  if (s.is_array()) {
    for (Json& x : s) rebase_refs(x, base);
    return;
  }
  if (!s.is_object()) return;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (it.key() == "$ref" && it->is_string() && it->get<std::string>().starts_with("#"))
      *it = "#" + base + it->get<std::string>().substr(1);
    else rebase_refs(*it, base);
  }
}

// `text` as a GBNF string literal.
std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '"' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out + "\"";
}

Json parameters_of(const Json& tool) {
  const Json& fn = tool["function"];
  const auto p = fn.find("parameters");
  return p == fn.end() || p->is_null() ? Json{{"type", "object"}} : *p;
}

// The schema of one call's JSON: {"name": const, "<args_key>": parameters}.
Json call_schema(const Json& tool, const std::string& args_key, const std::string& base) {
  Json params = parameters_of(tool);
  rebase_refs(params, base + "/properties/" + args_key);
  Json props = Json::object();
  props["name"] = {{"const", tool["function"]["name"]}};
  props[args_key] = std::move(params);
  return {{"type", "object"}, {"properties", std::move(props)},
          {"required", Json::array({"name", args_key})}, {"additionalProperties", false}};
}

}  // namespace

std::optional<ApiError> read_chat_tools(const Json& body, ChatTools& out) {
  if (field(body, "functions") || field(body, "function_call"))
    return invalid("'functions' and 'function_call' are deprecated; use 'tools' and 'tool_choice'", "functions");
  if (const Json* tools = field(body, "tools")) {
    if (!tools->is_array()) return invalid("'tools' must be an array of {\"type\": \"function\", ...}", "tools");
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i)
      if (auto e = read_tool((*tools)[i], i, names)) return e;
    out.tools = *tools;
  }
  if (const Json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return invalid("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out.parallel = p->get<bool>();
  }
  const Json* choice = field(body, "tool_choice");
  if (!choice) return std::nullopt;
  if (auto e = read_tool_choice(*choice, out)) return e;
  if (!out.any() && (out.choice == ChatTools::Choice::kRequired || out.choice == ChatTools::Choice::kNamed))
    return invalid("'tool_choice' asks for a tool call but the request has no 'tools'", "tool_choice");
  if (out.choice == ChatTools::Choice::kNamed) {
    for (const Json& t : out.tools)
      if (t["function"]["name"] == out.named) return std::nullopt;
    return invalid("'tool_choice' names the function '" + out.named + "', which is not in 'tools'", "tool_choice");
  }
  return std::nullopt;
}

Result<std::shared_ptr<const Grammar>> tool_call_grammar(const ChatTools& tools, ToolCallStyle style,
                                                         std::string_view prefix) {
  const std::string args_key = style == ToolCallStyle::kLlama3 ? "parameters" : "arguments";
  Json any_of = Json::array();
  Json defs = Json::object();
  std::string named_calls;  // kMistralArgs: "name[ARGS]" rule | ...
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const Json& t = tools.tools[i];
    const std::string name = t["function"]["name"].get<std::string>();
    if (tools.choice == ChatTools::Choice::kNamed && name != tools.named) continue;
    // Alone first, so that an error points into this tool's own schema.
    if (auto alone = json_schema_to_gbnf(parameters_of(t).dump()); !alone.ok()) {
      Error e = err("the parameters schema of tool '", name, "' (tools[", i, "]) cannot be used: ",
                    alone.error().message);
      e.code = "tools";
      return e;
    }
    if (style == ToolCallStyle::kMistralArgs) {
      // Each tool's parameters under $defs, so that the rule compiled from
      // them is named after its key, and the name can go before it.
      const std::string key = "duet-args-" + std::to_string(defs.size());
      Json params = parameters_of(t);
      rebase_refs(params, "/$defs/" + key);
      defs[key] = std::move(params);
      any_of.push_back({{"$ref", "#/$defs/" + key}});
      named_calls += (named_calls.empty() ? "" : " | ") + gbnf_literal(name + "[ARGS]") + " " + key;
      continue;
    }
    any_of.push_back(call_schema(t, args_key, "/anyOf/" + std::to_string(any_of.size())));
  }
  Json schema = {{"anyOf", std::move(any_of)}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  DUET_ASSIGN(std::string call, json_schema_to_gbnf(schema.dump()));
  // The schema's root becomes one call; '_' is never in its generated names.
  call.replace(0, std::string_view("root").size(), "tool_call_json");
  // With parallel calls, up to kMaxParallelCalls of them.
  const auto more = [&](const std::string& sep, const std::string& item) {
    return tools.parallel ? " (" + sep + " " + item + "){0," + std::to_string(kMaxParallelCalls - 1) + "}" : "";
  };
  std::string root;
  switch (style) {
    case ToolCallStyle::kHermes:
      root = "root ::= one_call" + more(R"("\n")", "one_call") +
             "\none_call ::= \"<tool_call>\\n\" tool_call_json \"\\n</tool_call>\"\n";
      break;
    case ToolCallStyle::kLlama3: root = "root ::= tool_call_json" + more(R"("; ")", "tool_call_json") + "\n"; break;
    case ToolCallStyle::kMistral:
      root = "root ::= \"[TOOL_CALLS][\" tool_call_json" + more(R"(", ")", "tool_call_json") + " \"]\"\n";
      break;
    case ToolCallStyle::kMistralArgs:
      for (size_t i = 0; i < schema["$defs"].size(); ++i) {
        const std::string rule = "\nduet-args-" + std::to_string(i);
        // A rule of the tools' own that took the name first would be a wrong grammar, not a call.
        if (call.find(rule + " ::= ") == std::string::npos || call.find(rule + "-2 ::= ") != std::string::npos) {
          Error e = err("the tools' parameters schemas define a name duet uses ('duet-args-", i, "')");
          e.code = "tools";
          return e;
        }
      }
      root = "root ::= one_call" + more("", "one_call") + "\none_call ::= \"[TOOL_CALLS]\" (" + named_calls + ")\n";
      break;
  }
  if (!prefix.empty()) root.insert(std::string_view("root ::= ").size(), gbnf_literal(prefix) + " ");
  return Grammar::from_gbnf(root + call);
}

std::string new_tool_call_id() {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(9, ' ');
  for (char& c : id) c = kAlnum[rng() % (sizeof kAlnum - 1)];
  return id;
}

}  // namespace duet::server
