// The single-class passes that the multi-regex pre-tokenizers (DeepSeek,
// Falcon, llama.cpp's default, StarCoder) are made of.
//
// Two facts of how llama.cpp runs these regexes decide the edge cases. A
// regex that names a Unicode category (\p{L}, \p{P}, \p{N}) sees each
// non-ASCII code point as its category and ASCII as itself; one that lists
// code points instead sees them as they are, except that every non-ASCII
// whitespace code point is replaced by \v first. So \s is White_Space either
// way, and a listed range never matches non-ASCII whitespace (U+3000 is in
// DeepSeek's [　-。] but never taken by it).
#include <algorithm>
#include <array>
#include <span>

#include "tokenizer/pretokenizer_passes.h"

namespace duet::pretok {
namespace {

struct Range {
  uint32_t first, last;  // inclusive
};

// Whether code point k of t is in one of `ranges` (sorted, disjoint), as a
// regex that lists code points sees it.
bool in_ranges(const Text& t, size_t k, std::span<const Range> ranges) {
  if (k >= t.size()) return false;
  const uint32_t cp = t.at(k);
  if (cp >= 0x80 && t.is(k, CharClass::kWhitespace)) return false;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t c, const Range& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

// \s?X+ where X holds at code point k when in(t, k).
template <class In>
size_t match_space_then_run(const Text& t, size_t i, In in) {
  const size_t j = t.is(i, CharClass::kWhitespace) && in(t, i + 1) ? i + 1 : i;
  return t.run_while(j, in);
}

bool is_punct(const Text& t, size_t k) { return t.is(k, CharClass::kPunctuation); }
bool is_letter_at(const Text& t, size_t k) { return t.is(k, CharClass::kLetter); }

// [\p{P}\$\+<=>\^~\|]: Unicode punctuation and the ASCII symbols but `,
// which Falcon's form of the class adds (`backtick`).
template <bool backtick>
bool is_punct_or_ascii_symbol(const Text& t, size_t k) {
  switch (t.at(k)) {
    case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|': return true;
    case '`': return backtick;
    default: return is_punct(t, k);
  }
}

// 一-龥 (U+4E00..U+9FA5), ࠀ-一 (U+0800..U+4E00), 가-퟿ (U+AC00..U+D7FF).
constexpr std::array<Range, 2> kCjk = {{{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}}};

// DeepSeek LLM's letter class, as its tokenizer.json lists it: the cased
// letters (Lu, Ll, Lt) of an older Unicode, with its gaps (no Georgian
// Mkhedruli, no Latin Extended-D past U+A78E).
constexpr std::array<Range, 84> kDeepseekCased = {{
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}};

// DeepSeek LLM's [!-/:-~！-／：-～‘-‟　-。]: ASCII punctuation, symbols and
// (through :-~) letters; quotation marks; CJK space and marks; the
// full-width forms of the ASCII range.
constexpr std::array<Range, 6> kDeepseekMarks = {{
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
}};

}  // namespace

size_t match_newline(const Text& t, size_t i) { return t.is_newline(i) ? i + 1 : i; }

size_t match_number(const Text& t, size_t i) { return t.is(i, CharClass::kNumber) ? i + 1 : i; }

size_t match_numbers(const Text& t, size_t i) { return t.run(i, CharClass::kNumber); }

size_t match_three_ascii_digits(const Text& t, size_t i) {
  for (size_t k = i; k < i + 3; ++k) {
    if (t.at(k) < '0' || t.at(k) > '9') return i;  // at() is 0 past the end
  }
  return i + 3;
}

size_t match_punct_run(const Text& t, size_t i) {
  return t.run_while(i, is_punct_or_ascii_symbol<false>);
}

size_t match_punct_run_backtick(const Text& t, size_t i) {
  return t.run_while(i, is_punct_or_ascii_symbol<true>);
}

size_t match_space_letters(const Text& t, size_t i) { return match_space_then_run(t, i, is_letter_at); }

size_t match_space_punct(const Text& t, size_t i) { return match_space_then_run(t, i, is_punct); }

size_t match_trailing_space(const Text& t, size_t i) {
  if (!t.is(i, CharClass::kWhitespace)) return i;
  const size_t end = t.run(i, CharClass::kWhitespace);
  return end == t.size() ? end : i;
}

size_t match_cjk_run(const Text& t, size_t i) {
  return t.run_while(i, [](const Text& x, size_t k) { return in_ranges(x, k, kCjk); });
}

size_t match_space_cased_letters(const Text& t, size_t i) {
  return match_space_then_run(t, i, [](const Text& x, size_t k) { return in_ranges(x, k, kDeepseekCased); });
}

size_t match_space_deepseek_marks(const Text& t, size_t i) {
  return match_space_then_run(t, i, [](const Text& x, size_t k) { return in_ranges(x, k, kDeepseekMarks); });
}

}  // namespace duet::pretok
