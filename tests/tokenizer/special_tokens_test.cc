// Added tokens in raw text, cut the way llama.cpp's tokenizer_st_partition
// cuts them: longest token first, user-defined always, control and unknown
// only with parse_special, and Phi-3's rstrip keyed on the model's name.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/special_tokens.h"

namespace duet {
namespace {

// Each piece as "[id]" or its plain text.
std::string cut(const SpecialTokens& s, std::string_view text, bool parse_special) {
  std::vector<SpecialTokens::Piece> pieces;
  s.partition(text, parse_special, pieces);
  std::string out;
  for (const auto& p : pieces) {
    out += p.id >= 0 ? "[" + std::to_string(p.id) + "]" : "(" + std::string(text.substr(p.begin, p.end - p.begin)) + ")";
  }
  return out;
}

constexpr auto N = TokenType::kNormal, C = TokenType::kControl, U = TokenType::kUserDefined,
               K = TokenType::kUnknown;

TEST(SpecialTokens, LongestFirstThenLeftToRight) {
  const SpecialTokens s({"a", "<to", "tool!", "<s>", "<unk>", "ab", "ba"}, {N, U, U, C, K, U, U});
  EXPECT_EQ(cut(s, "<tool!", false), "(<)[2]");  // the longer token wins though it starts later
  EXPECT_EQ(cut(s, "<to<tool!x", false), "[1](<)[2](x)");
  EXPECT_EQ(cut(s, "<s><unk>", false), "(<s><unk>)");  // control and unknown need parse_special
  EXPECT_EQ(cut(s, "<s><unk>", true), "[3][4]");
  // Equal lengths: the lower id first, even where the other starts earlier.
  EXPECT_EQ(cut(s, "aba", false), "[5](a)");
  EXPECT_EQ(cut(s, "bab", false), "(b)[5]");
  EXPECT_EQ(cut(s, "", false), "");
  EXPECT_EQ(cut(s, "plain", true), "(plain)");
}

// llama.cpp drops the whitespace after a Phi-3 model's special tokens, but
// not after <s>, <unk> or <|endoftext|>, and only for models named so.
TEST(SpecialTokens, Phi3TokensTakeTheWhitespaceAfterThem) {
  const std::vector<std::string> texts = {"<unk>", "<s>", "</s>", "<|endoftext|>", "<|user|>", "<|end|>", "x"};
  const std::vector<TokenType> types = {C, C, U, C, C, C, N};
  SpecialTokens phi(texts, types);
  phi.apply_model_rules("Phi-3 Mini 4k Instruct");
  EXPECT_EQ(cut(phi, "<|user|>\n \tx<|end|>\n", true), "[4](x)[5]");
  EXPECT_EQ(cut(phi, "<s> x<|endoftext|> x<unk> x", true), "[1]( x)[3]( x)[0]( x)");
  EXPECT_EQ(cut(phi, "</s>  x", false), "[2](x)");
  SpecialTokens also(texts, types);
  also.apply_model_rules("PHI3");
  EXPECT_EQ(cut(also, "<|user|>\nx", true), "[4](x)");
  SpecialTokens other(texts, types);
  other.apply_model_rules("Llama 2 7B");
  EXPECT_EQ(cut(other, "<|user|>\n \tx<|end|>\n", true), "[4](\n \tx)[5](\n)");
}

// The same on the real Phi-3 vocabulary (general.name "Phi3"): llama.cpp
// tokenizes this chat turn to these 8 ids, keeping none of the newlines
// that follow a special token.
TEST(SpecialTokens, Phi3VocabularyMatchesLlamaCpp) {
  auto f = GgufFile::open(testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-phi-3.gguf"));
  ASSERT_TRUE(f.ok());
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->encode("<|user|>\nSYS\nHI<|end|>\n<|assistant|>\n", true, true),
            (std::vector<int32_t>{1, 32010, 317, 21554, 13, 17628, 32007, 32001}));
}

}  // namespace
}  // namespace duet
