// The regular expressions pre-tokenizers are made of, each as a hand-written
// matcher over code points that gives the same leftmost, first-alternative-
// wins match as the regex does in llama.cpp.
//
// A pre-tokenizer is a list of passes, applied one after another as llama.cpp
// applies its list of regexes: each pass cuts every word of the one before
// into its matches and the stretches between them (which stay words too), and
// sees each word as a whole text, so $ and (?!\S) hold at the word's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tokenizer/unicode_data.h"

namespace duet::pretok {

// The code points of one word with their classes.
class Text {
 public:
  Text(std::span<const uint32_t> cps, std::span<const CharClass> cls) : cps_(cps), cls_(cls) {}
  size_t size() const { return cps_.size(); }
  // Past the end: code point 0 of class kOther, which no rule takes as part of
  // a match that needs a letter, number, space or newline there.
  uint32_t at(size_t i) const { return i < cps_.size() ? cps_[i] : 0; }
  CharClass cls(size_t i) const { return i < cls_.size() ? cls_[i] : CharClass::kOther; }
  bool is(size_t i, CharClass c) const { return i < cls_.size() && cls_[i] == c; }
  bool is_newline(size_t i) const { return at(i) == '\r' || at(i) == '\n'; }
  // The end of the run that starts at i of code points for which
  // pred(*this, k) holds.
  template <class Pred>
  size_t run_while(size_t i, Pred pred) const {
    while (i < size() && pred(*this, i)) ++i;
    return i;
  }
  size_t run(size_t i, CharClass c) const {
    return run_while(i, [c](const Text& t, size_t k) { return t.is(k, c); });
  }

 private:
  std::span<const uint32_t> cps_;
  std::span<const CharClass> cls_;
};

// One pass: the end of the match that starts at code point i, or i when no
// match starts there.
using Matcher = size_t (*)(const Text& t, size_t i);

// The GPT-2 family: one regex whose alternatives cover every code point
// (pretokenizer_words.cc).
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const Text& t, size_t i);
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3(const Text& t, size_t i);
// As match_llama3 with \p{N} (one digit per word) for \p{N}{1,3}.
size_t match_qwen2(const Text& t, size_t i);
// As match_qwen2 with marks joining letters: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+
// and  ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*.
size_t match_qwen35(const Text& t, size_t i);

// Single-class passes of the multi-regex pre-tokenizers (pretokenizer_splits.cc).
size_t match_newline(const Text& t, size_t i);           // [\r\n]
size_t match_number(const Text& t, size_t i);            // \p{N}
size_t match_numbers(const Text& t, size_t i);           // \p{N}+
size_t match_three_ascii_digits(const Text& t, size_t i);  // [0-9][0-9][0-9]
size_t match_punct_run(const Text& t, size_t i);         // [\p{P}\$\+<=>\^~\|]+
size_t match_punct_run_backtick(const Text& t, size_t i);  // [\p{P}\$\+<=>\^~\|`]+
size_t match_space_letters(const Text& t, size_t i);     // \s?\p{L}+
size_t match_space_punct(const Text& t, size_t i);       // \s?\p{P}+
size_t match_trailing_space(const Text& t, size_t i);    // \s+$
// [一-龥ࠀ-一가-퟿]+: CJK ideographs, most of the BMP below them, Hangul.
size_t match_cjk_run(const Text& t, size_t i);
// DeepSeek LLM's \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+ (cased letters of an older Unicode).
size_t match_space_cased_letters(const Text& t, size_t i);
// DeepSeek LLM's \s?[!-/:-~！-／：-～‘-‟　-。]+ (ASCII and full-width marks).
size_t match_space_deepseek_marks(const Text& t, size_t i);

}  // namespace duet::pretok
