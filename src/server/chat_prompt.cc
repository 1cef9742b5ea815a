#include "server/chat_prompt.h"

#include "tokenizer/chat_templates_builtin.h"

namespace duet::server {
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

}  // namespace

Result<std::string> llama2_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages) {
  DUET_TRY(chat_supported(model));
  DUET_ASSIGN(const ChatTemplate llama2,
              ChatTemplate::parse_for(*builtin_chat_template("llama2"), model.tokenizer()));
  return llama2.apply(messages, /*add_generation_prompt=*/true);
}

}  // namespace duet::server
