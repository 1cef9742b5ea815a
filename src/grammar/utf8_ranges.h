// Code-point ranges to UTF-8 byte patterns. A character class such as
// [^"\\] or [а-я] becomes a few alternatives, each a fixed-length sequence
// of byte sets, so the matcher never decodes UTF-8: a token that ends in the
// middle of a character simply leaves the matcher inside that alternative.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/byte_set.h"

namespace duet {

using CodeRange = std::pair<uint32_t, uint32_t>;  // inclusive
using BytePattern = std::vector<ByteSet>;         // one set per byte position

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged, surrogates (U+D800..U+DFFF) removed.
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges);
// Every valid code point not in `ranges` (which must be normalized).
std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges);

// The byte patterns matching exactly the UTF-8 encodings of `ranges`
// (normalized), with patterns that differ in one position merged.
std::vector<BytePattern> utf8_patterns(const std::vector<CodeRange>& ranges);

// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace duet
