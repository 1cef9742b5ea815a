#include "cli/chat_template_option.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/json_parse.h"
#include "tokenizer/chat_templates_builtin.h"

namespace duet::cli {
namespace {

std::string builtin_names() {
  std::string names;
  for (const auto name : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

// A tokenizer_config.json's chat_template: a string, or a list of
// {"name", "template"} from which "default" is taken.
Result<std::string> template_from_config(const std::string& path, const std::string& text) {
  const auto parsed = parse_json(text);
  const nlohmann::json j = parsed.ok() ? *parsed : nlohmann::json();
  if (!j.is_object() || !j.contains("chat_template"))
    return err(path, ": a JSON file must be a tokenizer_config.json with \"chat_template\"");
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
  }
  return err(path, ": \"chat_template\" is neither a string nor a list with a \"default\" entry");
}

}  // namespace

std::string chat_template_option_help() {
  return "Chat template: a built-in name (" + builtin_names() +
         "), a Jinja file, or a tokenizer_config.json (default: the model's tokenizer.chat_template)";
}

Result<std::string> chat_template_source(const std::string& option) {
  if (const auto builtin = builtin_chat_template(option)) return std::string(*builtin);
  if (!std::filesystem::is_regular_file(option))
    return err("--chat-template ", option, ": neither a built-in template (", builtin_names(),
               ") nor a readable file");
  DUET_ASSIGN(std::string text, read_text(option));
  if (option.ends_with(".json")) return template_from_config(option, text);
  return text;
}

Result<ChatTemplate> resolve_chat_template(const std::string& option, const Model& model) {
  std::string source;
  if (option.empty()) {
    if (!model.file().has("tokenizer.chat_template"))
      return err("the model has no tokenizer.chat_template; choose one with --chat-template (", builtin_names(),
                 ", or a file)");
    DUET_ASSIGN(source, model.file().get_string("tokenizer.chat_template"));
  } else {
    DUET_ASSIGN(source, chat_template_source(option));
  }
  return ChatTemplate::parse_for(source, model.tokenizer());
}

}  // namespace duet::cli
