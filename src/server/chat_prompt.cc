#include "server/chat_prompt.h"

#include "tokenizer/chat_templates_builtin.h"
#include "tokenizer/jinja/json_value.h"

namespace duet::server {

using Json = nlohmann::ordered_json;

namespace {

Status chat_supported(const Model& model) {
  const GgufFile& f = model.file();
  if (f.has("tokenizer.chat_template")) {
    auto t = f.get_string("tokenizer.chat_template");
    if (t && t->find("[INST]") != std::string::npos) return {};
    return err("this model's chat template is not supported (only the Llama 2 [INST] format is); "
               "use /v1/completions");
  }
  auto kind = f.get_string("tokenizer.ggml.model");
  const Tokenizer& tok = model.tokenizer();
  if (kind && *kind == "llama" && tok.bos_id() >= 0 && tok.eos_id() >= 0) return {};
  return err("this model has no chat template; use /v1/completions");
}

// A template that renders tools and tool calls itself.
bool knows_tools(const ChatTemplate* tmpl) {
  return tmpl && (tmpl->source().find("tools") != std::string::npos ||
                  tmpl->source().find("tool_calls") != std::string::npos);
}

std::string describe_tools(const Json& tools) {
  std::string text =
      "# Tools\n\nYou can call functions to help with the user's request. Their signatures, one JSON "
      "object per line:\n<tools>";
  for (const Json& t : tools) text.append("\n").append(t.dump());
  text +=
      "\n</tools>\n\nTo call a function, reply with its name and a JSON object of arguments inside "
      "<tool_call></tool_call> tags, one block per call:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": <args-json-object>}\n</tool_call>";
  return text;
}

std::string hermes_call_text(const Json& call) {
  const Json& fn = call["function"];
  const Json& args = fn["arguments"];
  return "<tool_call>\n{\"name\": " + fn["name"].dump() + ", \"arguments\": " +
         (args.is_string() ? args.get<std::string>() : args.dump()) + "}\n</tool_call>";
}

// The conversation in plain user/assistant/system turns for a template
// that knows no tools: the tools described in the system message, calls in
// the assistant's text, results as user turns.
Json inline_tools(const Json& messages, const ChatTools& tools) {
  Json out = Json::array();
  for (const Json& m : messages) {
    Json plain = {{"role", m["role"]}, {"content", m["content"]}};
    if (m["role"] == "tool") {
      std::string result = "<tool_response>\n";
      result.append(m["content"].get<std::string>()).append("\n</tool_response>");
      plain = {{"role", "user"}, {"content", std::move(result)}};
    } else if (m.contains("tool_calls")) {
      std::string content = m["content"].get<std::string>();
      for (const Json& c : m["tool_calls"]) {
        if (!content.empty()) content += '\n';
        content += hermes_call_text(c);
      }
      plain["content"] = content;
    }
    out.push_back(std::move(plain));
  }
  if (!tools.offered()) return out;
  const std::string described = describe_tools(tools.tools);
  if (!out.empty() && out[0]["role"] == "system") out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + described;
  else out.insert(out.begin(), Json{{"role", "system"}, {"content", described}});
  return out;
}

Result<std::string> render(const ChatTemplate* tmpl, const Model& model, const GenerateRequest& r) {
  const bool native = knows_tools(tmpl);
  const Json messages = native ? r.template_messages : inline_tools(r.template_messages, r.tools);
  if (!tmpl) {
    std::vector<ChatMessage> plain;
    for (const Json& m : messages) plain.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    return llama2_chat_prompt(model, plain);
  }
  ChatInput input;
  input.messages = jinja::value_from_json(messages);
  if (native && r.tools.offered()) input.tools = jinja::value_from_json(r.tools.tools);
  const jinja::Value kwargs = jinja::value_from_json(r.template_kwargs);
  if (kwargs.is_dict()) input.variables = kwargs.dict();
  input.add_generation_prompt = true;
  return tmpl->render(input);
}

}  // namespace

Result<std::string> llama2_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages) {
  DUET_TRY(chat_supported(model));
  DUET_ASSIGN(const ChatTemplate llama2,
              ChatTemplate::parse_for(*builtin_chat_template("llama2"), model.tokenizer()));
  return llama2.apply(messages, /*add_generation_prompt=*/true);
}

std::optional<ApiError> render_chat_request(const ChatTemplate* tmpl, const Model& model, GenerateRequest& r,
                                            std::string& prompt) {
  auto text = render(tmpl, model, r);
  if (!text) return invalid(text.error().message, "messages");
  prompt = std::move(*text);
  // A template that cannot write tool calls gets them in duet's (Hermes) words.
  r.format = chat_format_for_template(tmpl ? tmpl->source() : std::string_view());
  if (!knows_tools(tmpl)) r.format.tools = ToolCallStyle::kHermes;
  r.format.starts_in_reasoning = prompt_opens_reasoning(r.format, prompt);
  if (!r.tools.forced()) return std::nullopt;
  if (r.params.grammar)
    return invalid("a tool_choice that forces a call cannot be combined with 'grammar' or 'response_format'",
                   "tool_choice");
  // Reasoning the prompt opened is closed first: the calls are the reply.
  const std::string prefix = r.format.starts_in_reasoning ? r.format.think_close + "\n\n" : "";
  auto g = tool_call_grammar(r.tools, r.format.tools, prefix);
  if (!g) return invalid(g.error().message, "tools");
  r.params.grammar = *g;
  return std::nullopt;
}

}  // namespace duet::server
