// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions that
// cut text into words before BPE merges run inside each word. Each is a list
// of hand-written matchers (pretokenizer_passes.h) that gives the same words
// as llama.cpp's regexes.
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
  // As kQwen2 with marks (\p{M}) counted as letters (Qwen 3.5).
  kQwen35,
  // \p{N}, then kGpt2 (StarCoder, Refact and others).
  kDigitsThenGpt2,
  // [\p{P}\$\+<=>\^~\|`]+, then kGpt2, then [0-9][0-9][0-9].
  kFalcon,
  // llama.cpp's rule for a file without tokenizer.ggml.pre: as kFalcon
  // without the backtick, with \p{N}+ before the digit triples.
  kDefault,
  // [\r\n], \s?<cased letters>+, \s?<ASCII and full-width marks>+, \s+$,
  // <CJK>+, \p{N}+.
  kDeepseekLlm,
  // [\r\n], \s?\p{L}+, \s?\p{P}+, <CJK>+, \p{N}.
  kDeepseekCoder,
};

// What a tokenizer.ggml.pre name stands for in llama.cpp: the split rule and
// the two encoding defaults that come with the name.
struct PreTokenizerInfo {
  PreTokenizer rule;
  // A word that is a token is emitted whole, without merges (Llama 3).
  bool ignore_merges = false;
  // Encode adds BOS where the file has no tokenizer.ggml.add_bos_token.
  bool add_bos = false;
};

// The rule for a GGUF tokenizer.ggml.pre name (the names llama.cpp's converter
// writes; "default" also stands for a file without the key); an error names a
// pre-tokenizer duet does not implement.
Result<PreTokenizerInfo> pre_tokenizer_from_name(std::string_view name);

// Cuts `text` into words; appends the end index (exclusive, in code points)
// of each word to `ends`. The words cover the whole text.
void pre_tokenize(PreTokenizer kind, std::span<const uint32_t> text, std::vector<size_t>& ends);

}  // namespace duet
