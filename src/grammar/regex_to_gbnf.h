// A JSON Schema `pattern` (an ECMA-262 regex subset) to a GBNF expression
// over the *encoded* JSON string content: a `"` or `\` the regex allows is
// produced as its escape, so the grammar's output is always a valid string.
//
// Supported: literals and escapes (\. \\ \/ \n \t \uHHHH ...), \d \w \s \D
// \W \S, classes with ranges and negation, `.`, groups `( )` and `(?: )`,
// `|`, `* + ?` and `{m} {m,} {m,n}` (lazy `?` accepted, same language), `^`
// at the start and `$` at the end. Without `^`/`$` the pattern may match
// anywhere, so any text may come before/after. Control characters other
// than \n \t \r in a class are left out. Backreferences, lookaround and
// other constructs are errors naming the construct and its offset.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace duet {

// `json_char` is the name of a GBNF rule matching one encoded JSON string
// character (used for unanchored ends and `.`).
Result<std::string> regex_to_gbnf(std::string_view pattern, const std::string& json_char);

}  // namespace duet
