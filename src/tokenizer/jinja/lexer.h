// Splits a template into text and tag tokens, applying whitespace control the
// way Hugging Face's chat templating configures Jinja: trim_blocks (drop the
// newline after a block tag or comment), lstrip_blocks (drop spaces and tabs
// before a block tag or comment that starts a line), `-` in a delimiter
// (strip all whitespace on that side), `+` (keep it), and one trailing
// newline of the template dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace duet::jinja {

struct Pos {
  int32_t line = 1, col = 1;
};
std::string to_string(Pos p);  // "line 3:14"

struct Token {
  enum class Kind {
    kText,        // literal template text
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword
    kString,      // text holds the unescaped value
    kInt,
    kFloat,
    kOp,          // text holds the operator: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
    kEnd,
  };
  Kind kind;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  Pos pos;
};

Result<std::vector<Token>> lex(std::string_view source);

}  // namespace duet::jinja
