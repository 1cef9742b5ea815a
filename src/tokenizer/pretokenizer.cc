#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <array>
#include <string>

#include "tokenizer/unicode_data.h"

namespace duet {
namespace {

// Code points with their classes, looked up once.
class Text {
 public:
  Text(std::span<const uint32_t> cps, std::vector<CharClass>& cls) : cps_(cps), cls_(cls) {
    cls_.resize(cps.size());
    for (size_t i = 0; i < cps.size(); ++i) cls_[i] = char_class(cps[i]);
  }
  size_t size() const { return cps_.size(); }
  uint32_t at(size_t i) const { return i < cps_.size() ? cps_[i] : 0; }
  bool is(size_t i, CharClass c) const { return i < cps_.size() && cls_[i] == c; }
  bool is_newline(size_t i) const { return at(i) == '\r' || at(i) == '\n'; }
  // The end of the run of class `c` that starts at i.
  size_t run(size_t i, CharClass c) const {
    while (is(i, c)) ++i;
    return i;
  }

 private:
  std::span<const uint32_t> cps_;
  std::vector<CharClass>& cls_;
};

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
size_t match_trailing_space(const Text& t, size_t i) {
  const size_t end = t.run(i, CharClass::kWhitespace);
  if (end < t.size() && end - i >= 2) return end - 1;
  return end;
}

size_t match_gpt2(const Text& t, size_t i) {
  if (size_t e = match_contraction(t, i, false)) return e;
  // " ?X+" for X = \p{L}, \p{N}, [^\s\p{L}\p{N}].
  const size_t j = t.at(i) == ' ' && i + 1 < t.size() ? i + 1 : i;
  for (CharClass c : {CharClass::kLetter, CharClass::kNumber, CharClass::kOther}) {
    if (t.is(j, c)) return t.run(j, c);
  }
  return match_trailing_space(t, i);
}

size_t match_llama3(const Text& t, size_t i, size_t max_digits) {
  if (size_t e = match_contraction(t, i, true)) return e;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (t.is(i, CharClass::kLetter)) return t.run(i, CharClass::kLetter);
  if (!t.is_newline(i) && !t.is(i, CharClass::kNumber) && t.is(i + 1, CharClass::kLetter)) {
    return t.run(i + 1, CharClass::kLetter);
  }
  // \p{N}{1,max_digits}
  if (t.is(i, CharClass::kNumber)) {
    return std::min(t.run(i, CharClass::kNumber), i + max_digits);
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t j = t.at(i) == ' ' && i + 1 < t.size() ? i + 1 : i;
  if (t.is(j, CharClass::kOther)) {
    size_t e = t.run(j, CharClass::kOther);
    while (t.is_newline(e)) ++e;
    return e;
  }
  // Here t[i] is whitespace. \s*[\r\n]+: up to the last newline of the run.
  const size_t end = t.run(i, CharClass::kWhitespace);
  for (size_t k = end; k > i; --k) {
    if (t.is_newline(k - 1)) return k;
  }
  return match_trailing_space(t, i);
}

}  // namespace

Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  // Names that llama.cpp maps to one of these three rules.
  static constexpr std::array<std::string_view, 9> kGpt2 = {
      "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum"};
  static constexpr std::array<std::string_view, 8> kLlama3 = {
      "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"};
  static constexpr std::array<std::string_view, 4> kQwen2 = {"qwen2", "deepseek-r1-qwen", "kormo",
                                                             "megrez"};
  static constexpr std::array<std::string_view, 7> kDigits = {
      "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"};
  auto in = [&](const auto& names) { return std::find(names.begin(), names.end(), name) != names.end(); };
  if (in(kGpt2)) return PreTokenizer::kGpt2;
  if (in(kLlama3)) return PreTokenizer::kLlama3;
  if (in(kQwen2)) return PreTokenizer::kQwen2;
  if (in(kDigits)) return PreTokenizer::kDigitsThenGpt2;
  return err("unsupported pre-tokenizer '", std::string(name),
             "' (tokenizer.ggml.pre); supported: the gpt-2, llama-bpe, qwen2 and starcoder rules");
}

void pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cps, std::vector<size_t>& ends) {
  std::vector<CharClass> cls;
  // Words of `t`, which starts at code point `base` of the text.
  auto split = [&](const Text& t, size_t base) {
    for (size_t i = 0; i < t.size();) {
      switch (kind) {
        case PreTokenizer::kLlama3: i = match_llama3(t, i, 3); break;
        case PreTokenizer::kQwen2: i = match_llama3(t, i, 1); break;
        case PreTokenizer::kGpt2:
        case PreTokenizer::kDigitsThenGpt2: i = match_gpt2(t, i); break;
      }
      ends.push_back(base + i);
    }
  };
  if (kind != PreTokenizer::kDigitsThenGpt2) return split(Text(cps, cls), 0);
  // The second regex sees each stretch between digits as a whole text, so
  // (?!\S) holds at the stretch's end.
  for (size_t i = 0; i < cps.size();) {
    size_t j = i;
    while (j < cps.size() && !is_number(cps[j])) ++j;
    if (j > i) split(Text(cps.subspan(i, j - i), cls), i);
    if (j < cps.size()) ends.push_back(j + 1);
    i = j + 1;
  }
}

}  // namespace duet
