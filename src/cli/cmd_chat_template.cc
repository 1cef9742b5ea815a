// duet chat-template: renders a chat template for a conversation given as
// JSON, without a model: to see the exact prompt a template makes, and for
// the reference test that renders the same templates with Python's Jinja2.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/chat_template_option.h"
#include "cli/command.h"
#include "cli/common.h"
#include "core/json_parse.h"
#include "tokenizer/jinja/json_value.h"

namespace duet::cli {
namespace {

struct RenderOptions {
  std::string chat_template;
  std::string messages = "-";
  std::string bos, eos;
  bool add_generation_prompt = false;
  bool source = false;
};

// The conversation file: a JSON array of messages, or an object holding
// "messages", optional "tools", and further template variables
// ({"enable_thinking": false}) as apply_chat_template's keyword arguments.
// Messages keep every field (tool_calls, reasoning_content, ...); each needs
// a string "role".
Result<ChatInput> parse_conversation(const std::string& path) {
  DUET_ASSIGN(const std::string text, read_text(path));
  const auto parsed = parse_json<nlohmann::ordered_json>(text);
  if (!parsed.ok()) return err(path, ": ", parsed.error().message);
  const auto& j = *parsed;
  const bool is_object = j.is_object();
  const auto& messages = is_object && j.contains("messages") ? j["messages"] : j;
  if (!messages.is_array())
    return err(path, ": expected a JSON array of messages or an object with \"messages\"");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return err(path, ": message ", i, " needs a string \"role\"");
  }
  ChatInput input;
  input.messages = jinja::value_from_json(messages);
  if (is_object) {
    for (const auto& [key, value] : j.items()) {
      if (key == "tools") input.tools = jinja::value_from_json(value);
      else if (key != "messages") input.variables.set(key, jinja::value_from_json(value));
    }
  }
  return input;
}

int render(const RenderOptions& o) {
  auto source = chat_template_source(o.chat_template);
  if (!source) return fail(source.error());
  if (o.source) {
    std::fwrite(source->data(), 1, source->size(), stdout);
    return 0;
  }
  auto tmpl = ChatTemplate::parse(*source, o.bos, o.eos);
  if (!tmpl) return fail(tmpl.error());
  auto input = parse_conversation(o.messages);
  if (!input) return fail(input.error());
  input->add_generation_prompt = o.add_generation_prompt;
  auto text = tmpl->render(*input);
  if (!text) return fail(text.error());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

const bool chat_template_registered = register_command(
    "chat-template", "Render a chat template for messages given as JSON", [](CLI::App& app) {
      auto o = std::make_shared<RenderOptions>();
      app.add_option("--chat-template", o->chat_template, chat_template_option_help())->required();
      app.add_option("--messages", o->messages,
                     "JSON file of [{\"role\", \"content\", ...}], or of {\"messages\": [...], \"tools\": [...], "
                     "VARIABLE: value...} ('-': stdin)")
          ->capture_default_str();
      app.add_option("--bos", o->bos, "Text of the BOS token");
      app.add_option("--eos", o->eos, "Text of the EOS token");
      app.add_flag("--add-generation-prompt", o->add_generation_prompt, "End with the assistant's header");
      app.add_flag("--source", o->source, "Print the template's source instead");
      return [o] { return render(*o); };
    });

}  // namespace
}  // namespace duet::cli
