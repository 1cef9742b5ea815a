#include "server/chat_prompt.h"

namespace duet::server {

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

std::string llama2_chat_prompt(const std::vector<ChatMessage>& messages) {
  std::string system;
  size_t i = 0;
  while (i < messages.size() && messages[i].role == "system") {
    if (!system.empty()) system += "\n";
    system += messages[i++].content;
  }
  std::string out;
  bool first_user = true;
  for (; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      out += " " + m.content + " </s>";
      continue;
    }
    // A user turn (a later system message is folded in as user text).
    out += "<s>[INST] ";
    if (first_user && !system.empty()) out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
    first_user = false;
    out += m.content + " [/INST]";
  }
  if (first_user) out += "<s>[INST] <<SYS>>\n" + system + "\n<</SYS>>\n\n [/INST]";
  return out;
}

}  // namespace duet::server
