// The prompt of a /v1/completions request: its text (or ids) as given, or,
// with `suffix`, a fill-in-the-middle prompt the way FIM-trained models
// expect it — prefix token, the prompt, suffix token, the suffix, middle
// token — so that the completion is the text between the two (OpenAI's
// legacy insert mode; the suffix itself is not part of the returned text).
// A model whose vocabulary names no FIM tokens cannot take a suffix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace duet::server {

// The prompt's ids for completions request `r`. A prompt given as ids is
// decoded into r.prompt for `echo`, which puts it before each choice's text.
std::optional<ApiError> completion_prompt(const Tokenizer& tok, GenerateRequest& r, std::vector<int32_t>& prompt);

}  // namespace duet::server
