// The parsed form of a GBNF grammar, before it is lowered to byte sets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace duet {

struct GbnfExpr {
  enum class Kind { kAlt, kSeq, kLiteral, kClass, kRef, kRepeat };
  Kind kind = Kind::kSeq;
  std::vector<GbnfExpr> items;    // kAlt, kSeq; kRepeat: the one repeated item
  std::string text;               // kLiteral: UTF-8 bytes; kRef: rule name
  std::vector<CodeRange> ranges;  // kClass (as written; `.` is negated and empty)
  bool negated = false;           // kClass
  int min = 0, max = -1;          // kRepeat; max -1 is unbounded
  int line = 0, col = 0;          // where it starts, for errors
};

struct GbnfRule {
  std::string name;
  GbnfExpr body;
  int line = 0, col = 0;
};

}  // namespace duet
