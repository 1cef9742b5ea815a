// `--chat-template NAME|FILE`, shared by `duet chat` and `duet serve`: a
// built-in name, a Jinja file, or a tokenizer_config.json holding
// "chat_template"; without the option, the model's tokenizer.chat_template.
#pragma once

#include <string>

#include "core/error.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"

namespace duet::cli {

Result<ChatTemplate> resolve_chat_template(const std::string& option, const Model& model);

// The Jinja source `option` names (a built-in, a file, a tokenizer_config.json).
Result<std::string> chat_template_source(const std::string& option);

// Help text for the option, listing the built-in names.
std::string chat_template_option_help();

}  // namespace duet::cli
