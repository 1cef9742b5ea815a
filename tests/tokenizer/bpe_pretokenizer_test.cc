// The pieces under byte-level BPE: Unicode classes, lossy UTF-8 decoding, the
// GPT-2 byte alphabet, and the three pre-tokenizer rules on hand-traced cases.
#include <gtest/gtest.h>

#include "core/utf8.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode_data.h"

namespace duet {
namespace {

std::vector<std::string> split(PreTokenizer kind, const std::string& text) {
  std::vector<uint32_t> cps;
  decode_utf8_lossy(text, cps);
  std::vector<size_t> ends;
  pre_tokenize(kind, cps, ends);
  std::vector<std::string> words;
  size_t begin = 0;
  for (size_t end : ends) {
    std::string w;
    for (size_t i = begin; i < end; ++i) utf8::append(cps[i], w);
    words.push_back(w);
    begin = end;
  }
  return words;
}

using Words = std::vector<std::string>;

TEST(BpeUnicode, Classes) {
  EXPECT_TRUE(is_letter('a'));
  EXPECT_TRUE(is_letter(0xE9));    // é
  EXPECT_TRUE(is_letter(0x4E2D));  // 中
  EXPECT_TRUE(is_letter(0x3042));  // あ
  EXPECT_TRUE(is_letter(0x02B0));  // ʰ (Lm)
  EXPECT_TRUE(is_number('7'));
  EXPECT_TRUE(is_number(0xBD));     // ½ (No)
  EXPECT_TRUE(is_number(0x0663));   // Arabic-Indic three (Nd)
  EXPECT_TRUE(is_number(0x216B));   // Ⅻ (Nl)
  EXPECT_TRUE(is_whitespace(' '));
  EXPECT_TRUE(is_whitespace('\v'));
  EXPECT_TRUE(is_whitespace(0x85));    // NEL: White_Space, unlike JavaScript's \s
  EXPECT_TRUE(is_whitespace(0x3000));  // ideographic space
  EXPECT_TRUE(is_whitespace(0x2028));  // line separator
  EXPECT_FALSE(is_whitespace(0xFEFF));  // BOM is Cf, also unlike JavaScript's \s
  EXPECT_FALSE(is_whitespace(0x200B));  // zero-width space is Cf
  EXPECT_FALSE(is_whitespace(0x1C));    // Python's isspace() says yes; White_Space no
  EXPECT_EQ(char_class(0x0301), CharClass::kOther);   // combining acute (Mn)
  EXPECT_EQ(char_class(0x1F999), CharClass::kOther);  // 🦙
  EXPECT_EQ(char_class('_'), CharClass::kOther);
  EXPECT_EQ(char_class(0x10FFFF), CharClass::kOther);
  EXPECT_EQ(char_class(0x110000), CharClass::kOther);
  EXPECT_EQ(char_class(0x20000), CharClass::kLetter);  // CJK extension B
}

TEST(BpeUnicode, LossyUtf8MaximalSubparts) {
  auto decode = [](const std::string& s) {
    std::vector<uint32_t> cps;
    decode_utf8_lossy(s, cps);
    return cps;
  };
  const uint32_t R = 0xFFFD;
  EXPECT_EQ(decode("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode("\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{0x1F999}));
  EXPECT_EQ(decode("\xE2\x82x"), (std::vector<uint32_t>{R, 'x'}));    // truncated: one subpart
  EXPECT_EQ(decode("\xF0\x9F\xA6"), (std::vector<uint32_t>{R}));      // truncated at the end
  EXPECT_EQ(decode("\xC0\xAF"), (std::vector<uint32_t>{R, R}));       // overlong
  EXPECT_EQ(decode("\xED\xA0\x80"), (std::vector<uint32_t>{R, R, R}));  // surrogate
  EXPECT_EQ(decode("\xF4\x90\x80\x80"), (std::vector<uint32_t>{R, R, R, R}));  // > U+10FFFF
  EXPECT_EQ(decode("\x80\xFF"), (std::vector<uint32_t>{R, R}));
  EXPECT_EQ(decode(std::string("a\0b", 3)), (std::vector<uint32_t>{'a', 0, 'b'}));
}

TEST(BpeUnicode, Gpt2ByteAlphabet) {
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_codepoint('A'), uint32_t('A'));
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);  // soft hyphen -> Ń
  EXPECT_EQ(byte_to_codepoint(0xFF), 0xFFu);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(codepoint_to_byte(byte_to_codepoint(uint8_t(b))), b);
  EXPECT_EQ(codepoint_to_byte(0x20), -1);  // a space is not in the alphabet
  EXPECT_EQ(codepoint_to_byte(0x4E2D), -1);
  std::string out;
  EXPECT_TRUE(byte_level_decode("\xC4\xA0hi\xC4\x8A", out));
  EXPECT_EQ(out, " hi\n");
  out.clear();
  EXPECT_FALSE(byte_level_decode("a b", out));
}

TEST(BpePreTokenizer, Names) {
  EXPECT_EQ(*pre_tokenizer_from_name("gpt-2"), PreTokenizer::kGpt2);
  EXPECT_EQ(*pre_tokenizer_from_name("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(*pre_tokenizer_from_name("llama3"), PreTokenizer::kLlama3);
  EXPECT_EQ(*pre_tokenizer_from_name("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(*pre_tokenizer_from_name("deepseek-r1-qwen"), PreTokenizer::kQwen2);
  const Result<PreTokenizer> bad = pre_tokenizer_from_name("deepseek-coder");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unsupported pre-tokenizer 'deepseek-coder'"), std::string::npos);
}

TEST(BpePreTokenizer, Gpt2Rule) {
  const auto k = PreTokenizer::kGpt2;
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(k, "  hello"), (Words{" ", " hello"}));  // the last space joins the word
  EXPECT_EQ(split(k, "a   "), (Words{"a", "   "}));          // at the end, the run stays whole
  EXPECT_EQ(split(k, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split(k, "I'm I'M"), (Words{"I", "'m", " I", "'", "M"}));  // case-sensitive
  EXPECT_EQ(split(k, "they're'll"), (Words{"they", "'re", "'ll"}));
  EXPECT_EQ(split(k, "x1234 56"), (Words{"x", "1234", " 56"}));
  EXPECT_EQ(split(k, "?!. x"), (Words{"?!.", " x"}));
  EXPECT_EQ(split(k, "\tx"), (Words{"\t", "x"}));
  EXPECT_EQ(split(k, " "), (Words{" "}));
  EXPECT_EQ(split(k, ""), (Words{}));
  EXPECT_EQ(split(k, "日本語 テキスト"), (Words{"日本語", " テキスト"}));
  EXPECT_EQ(split(k, "é\xCC\x81"), (Words{"é", "\xCC\x81"}));  // a combining mark is not \p{L}
}

TEST(BpePreTokenizer, Llama3Rule) {
  const auto k = PreTokenizer::kLlama3;
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(k, "I'M don'T"), (Words{"I", "'M", " don", "'T"}));  // case-insensitive
  EXPECT_EQ(split(k, "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(split(k, " 123"), (Words{" ", "123"}));
  EXPECT_EQ(split(k, "\tword"), (Words{"\tword"}));  // any non-newline mark may lead a word
  EXPECT_EQ(split(k, "$x"), (Words{"$x"}));
  EXPECT_EQ(split(k, "\nx"), (Words{"\n", "x"}));
  EXPECT_EQ(split(k, "a\n\n  b"), (Words{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(split(k, "x!!\n\ny"), (Words{"x", "!!\n\n", "y"}));
  EXPECT_EQ(split(k, " \n \n x"), (Words{" \n \n", " x"}));  // up to the last newline
  EXPECT_EQ(split(k, "a  "), (Words{"a", "  "}));
}

TEST(BpePreTokenizer, Qwen2Rule) {
  const auto k = PreTokenizer::kQwen2;
  EXPECT_EQ(split(k, "1234"), (Words{"1", "2", "3", "4"}));
  EXPECT_EQ(split(k, "I'M x12"), (Words{"I", "'M", " x", "1", "2"}));
  EXPECT_EQ(split(k, "\tword"), (Words{"\tword"}));
}

TEST(BpePreTokenizer, DigitsThenGpt2Rule) {
  const auto k = PreTokenizer::kDigitsThenGpt2;
  EXPECT_EQ(*pre_tokenizer_from_name("starcoder"), k);
  // "a  " is split as a text of its own: its trailing run stays whole.
  EXPECT_EQ(split(k, "a  12 x"), (Words{"a", "  ", "1", "2", " x"}));
  EXPECT_EQ(split(k, "x1y"), (Words{"x", "1", "y"}));
  EXPECT_EQ(split(k, "42"), (Words{"4", "2"}));
  EXPECT_EQ(split(k, "I'm"), (Words{"I", "'m"}));
}

}  // namespace
}  // namespace duet
