// The GPT-2 family of pre-tokenizer regexes: one regex whose alternatives
// together match at every code point.
#include "tokenizer/pretokenizer_passes.h"

#include <algorithm>

namespace duet::pretok {
namespace {

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d: the end of the match at i, or 0.
size_t match_contraction(const Text& t, size_t i, bool ignore_case) {
  if (t.at(i) != '\'') return 0;
  auto letter = [&](size_t k) { return ignore_case ? ascii_lower(t.at(k)) : t.at(k); };
  const uint32_t a = letter(i + 1);
  if (i + 1 >= t.size()) return 0;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= t.size()) return 0;
  const uint32_t b = letter(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace code point i: a run of whitespace, less its
// last code point when a non-space follows and the run is longer than one, so
// that the last space stays with the next word.
size_t match_space_run(const Text& t, size_t i) {
  const size_t end = t.run(i, CharClass::kWhitespace);
  if (end < t.size() && end - i >= 2) return end - 1;
  return end;
}

bool is_lnw(CharClass c) {
  return c == CharClass::kLetter || c == CharClass::kNumber || c == CharClass::kWhitespace;
}

// What the Llama 3 shape varies between its vocabularies.
struct Llama3Shape {
  size_t max_digits;  // \p{N}{1,max_digits}
  bool marks_are_letters;  // [\p{L}\p{M}] where the others have \p{L}
};

size_t match_llama3_shape(const Text& t, size_t i, Llama3Shape shape) {
  auto letter = [&](const Text& x, size_t k) {
    return x.is(k, CharClass::kLetter) || (shape.marks_are_letters && x.is(k, CharClass::kMark));
  };
  // [^\s\p{L}\p{N}] (and not \p{M} where marks are letters).
  auto other = [&](const Text& x, size_t k) {
    return k < x.size() && !is_lnw(x.cls(k)) && !letter(x, k);
  };
  if (size_t e = match_contraction(t, i, true)) return e;
  // [^\r\n\p{L}\p{N}]?\p{L}+ (a mark that leads a run of letters is part of
  // the run where marks are letters, so one case covers both).
  if (letter(t, i)) return t.run_while(i, letter);
  if (!t.is_newline(i) && !t.is(i, CharClass::kNumber) && letter(t, i + 1)) {
    return t.run_while(i + 1, letter);
  }
  // \p{N}{1,max_digits}
  if (t.is(i, CharClass::kNumber)) {
    return std::min(t.run(i, CharClass::kNumber), i + shape.max_digits);
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t j = t.at(i) == ' ' && i + 1 < t.size() ? i + 1 : i;
  if (other(t, j)) {
    size_t e = t.run_while(j, other);
    while (t.is_newline(e)) ++e;
    return e;
  }
  // Here t[i] is whitespace. \s*[\r\n]+: up to the last newline of the run.
  const size_t end = t.run(i, CharClass::kWhitespace);
  for (size_t k = end; k > i; --k) {
    if (t.is_newline(k - 1)) return k;
  }
  return match_space_run(t, i);
}

}  // namespace

size_t match_gpt2(const Text& t, size_t i) {
  if (size_t e = match_contraction(t, i, false)) return e;
  // " ?X+" for X = \p{L}, \p{N}, [^\s\p{L}\p{N}].
  const size_t j = t.at(i) == ' ' && i + 1 < t.size() ? i + 1 : i;
  if (j < t.size()) {
    const CharClass c = t.cls(j);
    if (c == CharClass::kLetter || c == CharClass::kNumber) return t.run(j, c);
    if (!is_lnw(c)) return t.run_while(j, [](const Text& x, size_t k) { return !is_lnw(x.cls(k)); });
  }
  return match_space_run(t, i);
}

size_t match_llama3(const Text& t, size_t i) { return match_llama3_shape(t, i, {3, false}); }
size_t match_qwen2(const Text& t, size_t i) { return match_llama3_shape(t, i, {1, false}); }
size_t match_qwen35(const Text& t, size_t i) { return match_llama3_shape(t, i, {1, true}); }

}  // namespace duet::pretok
