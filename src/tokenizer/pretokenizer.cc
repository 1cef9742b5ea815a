#include "tokenizer/pretokenizer.h"

#include <string>
#include <utility>

#include "tokenizer/pretokenizer_passes.h"

namespace duet {
namespace {

using pretok::Matcher;
using pretok::Text;

struct NamedRule {
  std::string_view name;
  PreTokenizerInfo info;
};

constexpr PreTokenizerInfo kGpt2{PreTokenizer::kGpt2};
constexpr PreTokenizerInfo kLlama3{PreTokenizer::kLlama3, /*ignore_merges=*/true, /*add_bos=*/true};
constexpr PreTokenizerInfo kQwen2{PreTokenizer::kQwen2};
constexpr PreTokenizerInfo kDigits{PreTokenizer::kDigitsThenGpt2};

// The names llama.cpp maps to each rule it shares with duet.
constexpr NamedRule kNames[] = {
    {"default", {PreTokenizer::kDefault}},
    {"gpt-2", kGpt2}, {"phi-2", kGpt2}, {"jina-es", kGpt2}, {"jina-de", kGpt2},
    {"gigachat", kGpt2}, {"jina-v2-es", kGpt2}, {"jina-v2-de", kGpt2}, {"a.x-4.0", kGpt2},
    {"mellum", kGpt2}, {"mpt", kGpt2}, {"olmo", kGpt2}, {"jais", kGpt2}, {"trillion", kGpt2},
    {"granite-docling", kGpt2}, {"exaone4", kGpt2},
    {"llama3", kLlama3}, {"llama-v3", kLlama3}, {"llama-bpe", kLlama3}, {"falcon3", kLlama3},
    {"falcon-h1", kLlama3}, {"pixtral", kLlama3}, {"midm-2.0", kLlama3}, {"lfm2", kLlama3},
    {"qwen2", kQwen2}, {"deepseek-r1-qwen", kQwen2}, {"kormo", kQwen2}, {"megrez", kQwen2},
    {"stablelm2", kQwen2}, {"hunyuan", kQwen2},
    {"qwen35", {PreTokenizer::kQwen35}},
    {"starcoder", kDigits}, {"refact", kDigits}, {"command-r", kDigits}, {"smollm", kDigits},
    {"codeshell", kDigits}, {"exaone", kDigits}, {"minerva-7b", kDigits},
    {"falcon", {PreTokenizer::kFalcon}},
    {"deepseek-llm", {PreTokenizer::kDeepseekLlm}},
    {"deepseek-coder", {PreTokenizer::kDeepseekCoder}},
};

// The passes of each rule, in the order llama.cpp applies its regexes.
std::span<const Matcher> passes(PreTokenizer kind) {
  using namespace pretok;
  static constexpr Matcher kGpt2Passes[] = {match_gpt2};
  static constexpr Matcher kLlama3Passes[] = {match_llama3};
  static constexpr Matcher kQwen2Passes[] = {match_qwen2};
  static constexpr Matcher kQwen35Passes[] = {match_qwen35};
  static constexpr Matcher kDigitsPasses[] = {match_number, match_gpt2};
  static constexpr Matcher kFalconPasses[] = {match_punct_run_backtick, match_gpt2,
                                              match_three_ascii_digits};
  static constexpr Matcher kDefaultPasses[] = {match_punct_run, match_gpt2, match_numbers,
                                               match_three_ascii_digits};
  static constexpr Matcher kDeepseekLlmPasses[] = {
      match_newline, match_space_cased_letters, match_space_deepseek_marks,
      match_trailing_space, match_cjk_run, match_numbers};
  static constexpr Matcher kDeepseekCoderPasses[] = {
      match_newline, match_space_letters, match_space_punct, match_cjk_run, match_number};
  switch (kind) {
    case PreTokenizer::kGpt2: return kGpt2Passes;
    case PreTokenizer::kLlama3: return kLlama3Passes;
    case PreTokenizer::kQwen2: return kQwen2Passes;
    case PreTokenizer::kQwen35: return kQwen35Passes;
    case PreTokenizer::kDigitsThenGpt2: return kDigitsPasses;
    case PreTokenizer::kFalcon: return kFalconPasses;
    case PreTokenizer::kDefault: return kDefaultPasses;
    case PreTokenizer::kDeepseekLlm: return kDeepseekLlmPasses;
    case PreTokenizer::kDeepseekCoder: return kDeepseekCoderPasses;
  }
  return kGpt2Passes;
}

// Cuts the word `t`, which starts at code point `base` of the text, into the
// matches of `match` and the stretches between them; appends their ends.
void split_word(Matcher match, const Text& t, size_t base, std::vector<size_t>& ends) {
  size_t unmatched = 0;  // start of the stretch no match has covered yet
  for (size_t i = 0; i < t.size();) {
    const size_t e = match(t, i);
    if (e == i) {
      ++i;
      continue;
    }
    if (unmatched < i) ends.push_back(base + i);
    ends.push_back(base + e);
    i = unmatched = e;
  }
  if (unmatched < t.size()) ends.push_back(base + t.size());
}

}  // namespace

Result<PreTokenizerInfo> pre_tokenizer_from_name(std::string_view name) {
  for (const NamedRule& n : kNames) {
    if (n.name == name) return n.info;
  }
  return err("unsupported pre-tokenizer '", std::string(name),
             "' (tokenizer.ggml.pre); supported: the default, gpt-2, llama-bpe, qwen2, qwen35, "
             "starcoder, falcon, deepseek-llm and deepseek-coder rules and their aliases");
}

void pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cps, std::vector<size_t>& ends) {
  if (cps.empty()) return;
  std::vector<CharClass> cls(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = char_class(cps[i]);
  std::vector<size_t> words = {cps.size()}, next;
  for (Matcher match : passes(kind)) {
    next.clear();
    size_t begin = 0;
    for (size_t end : words) {
      const size_t n = end - begin;
      split_word(match, Text(cps.subspan(begin, n), std::span<const CharClass>(cls).subspan(begin, n)),
                 begin, next);
      begin = end;
    }
    std::swap(words, next);
  }
  ends.insert(ends.end(), words.begin(), words.end());
}

}  // namespace duet
