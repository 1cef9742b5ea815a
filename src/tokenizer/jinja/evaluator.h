// Runs a parsed template: statements write to the output, expressions
// evaluate to Values. Scoping follows Jinja: a for loop's body gets a fresh
// scope each iteration (so `set` inside it is not seen after the loop, which
// is why templates use namespace()), `if` opens none.
#pragma once

#include <string>

#include "core/error.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"

namespace duet::jinja {

Result<std::string> evaluate(const Body& body, const Dict& globals, const Limits& limits);

}  // namespace duet::jinja
