// GBNF text (llama.cpp's grammar syntax) to rules. Errors carry line:column
// and say what was expected; limits keep hostile text from exhausting the
// stack or memory.
#pragma once

#include <string_view>
#include <vector>

#include "core/error.h"
#include "grammar/gbnf_ast.h"

namespace duet {

struct GbnfLimits {
  size_t max_bytes = 4 << 20;  // grammar text
  int max_depth = 128;         // nested parentheses
  size_t max_rules = 20000;
  int max_repeat = 10000;      // the m and n of {m,n}
};

Result<std::vector<GbnfRule>> parse_gbnf(std::string_view text, const GbnfLimits& limits = {});

}  // namespace duet
