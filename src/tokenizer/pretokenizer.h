// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions that
// cut text into words before BPE merges run inside each word. Each rule is a
// hand-written matcher over code points that gives the same leftmost,
// first-alternative-wins matches as its regex.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace duet {

enum class PreTokenizer {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // As kLlama3 with \p{N} (one digit per word) in place of \p{N}{1,3}.
  kQwen2,
  // Every \p{N} alone, then kGpt2 inside each stretch between them
  // (StarCoder, Refact and others: two regexes applied one after the other).
  kDigitsThenGpt2,
};

// The rule a GGUF tokenizer.ggml.pre name stands for (the names llama.cpp's
// converter writes); an error names a pre-tokenizer duet does not implement.
Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// Cuts `text` into words; appends the end index (exclusive, in code points)
// of each word to `ends`. The words cover the whole text.
void pre_tokenize(PreTokenizer kind, std::span<const uint32_t> text, std::vector<size_t>& ends);

}  // namespace duet
