// Small helpers for writing GBNF text from code (the JSON Schema compiler
// emits GBNF, so what it builds can be printed and read).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace duet {

// `"..."` matching exactly `bytes` (UTF-8 passes through; quotes,
// backslashes and control bytes are escaped).
std::string gbnf_literal(std::string_view bytes);

// `[...]` matching the code points of `ranges`.
std::string gbnf_class(const std::vector<CodeRange>& ranges);

// "a | b | c" wrapped in parentheses when there is more than one.
std::string gbnf_group(const std::vector<std::string>& alternatives);

}  // namespace duet
