// A compiled grammar: rules of alternatives, each alternative a run of
// elements ending in kEnd, every terminal a set of bytes. Immutable once
// built, so one Grammar is shared by every sequence that uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "grammar/byte_set.h"
#include "grammar/gbnf_parser.h"

namespace duet {

struct GrammarElement {
  enum Kind : uint8_t { kEnd, kBytes, kRule };
  Kind kind;
  uint32_t arg;  // kBytes: index into byte_sets; kRule: rule index
};

struct GrammarRule {
  std::string name;               // generated rules: "parent/what"
  std::vector<uint32_t> alts;     // start of each alternative in elements
};

struct GrammarLimits {
  GbnfLimits text;
  size_t max_elements = 1 << 22;  // after {m,n} and classes are expanded
};

class Grammar {
 public:
  // Parses GBNF, resolves rule names from `root`, and rejects left
  // recursion (which a top-down matcher could never finish expanding).
  static Result<std::shared_ptr<const Grammar>> from_gbnf(std::string_view text,
                                                          const GrammarLimits& limits = {});

  const std::vector<GrammarElement>& elements() const { return elements_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  const std::vector<GrammarRule>& rules() const { return rules_; }
  uint32_t root() const { return root_; }

 private:
  friend class GrammarBuilder;
  std::vector<GrammarElement> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<GrammarRule> rules_;
  uint32_t root_ = 0;
};

}  // namespace duet
