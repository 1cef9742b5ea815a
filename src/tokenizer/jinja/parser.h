// Tokens to the statement tree. Anything outside the supported subset (a tag
// like macro or raw, a chained comparison) is an error naming the construct
// and its line:column.
#pragma once

#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace duet::jinja {

// Expressions and blocks nested deeper than this are rejected, so an
// untrusted template cannot exhaust the stack.
inline constexpr int kMaxNesting = 64;

Result<Body> parse(const std::vector<Token>& tokens);

}  // namespace duet::jinja
