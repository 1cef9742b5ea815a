#include "tokenizer/chat_template.h"

namespace duet {

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string bos_token, std::string eos_token) {
  auto parsed = jinja::Template::parse(source);
  if (!parsed) return err("chat template: ", parsed.error().message);
  ChatTemplate t;
  t.template_ = std::move(*parsed);
  t.source_ = std::string(source);
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  return t;
}

Result<ChatTemplate> ChatTemplate::parse_for(std::string_view source, const Tokenizer& tok) {
  const auto text = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  return parse(source, text(tok.bos_id()), text(tok.eos_id()));
}

Result<std::string> ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        const jinja::Limits& limits) const {
  ChatInput input;
  jinja::List list;
  for (const ChatMessage& m : messages) {
    jinja::Dict d;
    d.set("role", jinja::Value(m.role));
    d.set("content", jinja::Value(m.content));
    list.emplace_back(std::move(d));
  }
  input.messages = jinja::Value(std::move(list));
  input.add_generation_prompt = add_generation_prompt;
  return render(input, limits);
}

Result<std::string> ChatTemplate::render(const ChatInput& input, const jinja::Limits& limits) const {
  jinja::Dict context = input.variables;
  context.set("messages", input.messages);
  context.set("tools", input.tools);
  context.set("documents", jinja::Value::none());  // retrieval documents: duet passes none, as HF does by default
  context.set("add_generation_prompt", jinja::Value(input.add_generation_prompt));
  context.set("bos_token", jinja::Value(bos_));
  context.set("eos_token", jinja::Value(eos_));
  auto text = template_.render(context, limits);
  if (!text) return err("chat template: ", text.error().message);
  return std::move(*text);
}

}  // namespace duet
