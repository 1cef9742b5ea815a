// What the grammar tests ask of a compiled grammar, apart from any model.
#pragma once

#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"

namespace duet::testing {

// The whole string is in the language.
inline bool matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.accept_bytes(s) && m.can_end();
}

// Some continuation of the string is in the language.
inline bool is_prefix(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.accept_bytes(s);
}

}  // namespace duet::testing
