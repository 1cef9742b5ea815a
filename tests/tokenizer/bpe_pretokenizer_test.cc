// The pieces under byte-level BPE: Unicode classes, lossy UTF-8 decoding, the
// GPT-2 byte alphabet, and the pre-tokenizer rules on hand-traced cases.
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
  EXPECT_EQ(char_class(0x0301), CharClass::kMark);    // combining acute (Mn)
  EXPECT_EQ(char_class(0x0E31), CharClass::kMark);    // Thai mai han-akat (Mn)
  EXPECT_EQ(char_class(0x1F999), CharClass::kSymbol);  // 🦙 (So)
  EXPECT_EQ(char_class('$'), CharClass::kSymbol);      // Sc
  EXPECT_EQ(char_class('`'), CharClass::kSymbol);      // Sk
  EXPECT_EQ(char_class('_'), CharClass::kPunctuation);  // Pc
  EXPECT_EQ(char_class(0x3002), CharClass::kPunctuation);  // 。
  EXPECT_EQ(char_class(0x200B), CharClass::kOther);    // zero-width space (Cf)
  EXPECT_EQ(char_class(0x0378), CharClass::kOther);    // unassigned
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
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2")->rule, PreTokenizer::kGpt2);
  EXPECT_EQ(pre_tokenizer_from_name("mpt")->rule, PreTokenizer::kGpt2);
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe")->rule, PreTokenizer::kLlama3);
  EXPECT_EQ(pre_tokenizer_from_name("llama3")->rule, PreTokenizer::kLlama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2")->rule, PreTokenizer::kQwen2);
  EXPECT_EQ(pre_tokenizer_from_name("deepseek-r1-qwen")->rule, PreTokenizer::kQwen2);
  EXPECT_EQ(pre_tokenizer_from_name("qwen35")->rule, PreTokenizer::kQwen35);
  EXPECT_EQ(pre_tokenizer_from_name("falcon")->rule, PreTokenizer::kFalcon);
  EXPECT_EQ(pre_tokenizer_from_name("default")->rule, PreTokenizer::kDefault);
  EXPECT_EQ(pre_tokenizer_from_name("deepseek-llm")->rule, PreTokenizer::kDeepseekLlm);
  EXPECT_EQ(pre_tokenizer_from_name("deepseek-coder")->rule, PreTokenizer::kDeepseekCoder);
  // The encoding defaults that come with a name, as llama.cpp sets them:
  // only the Llama 3 family adds BOS and skips merges for whole-token words.
  EXPECT_TRUE(pre_tokenizer_from_name("llama-bpe")->add_bos);
  EXPECT_TRUE(pre_tokenizer_from_name("falcon3")->ignore_merges);
  for (const char* name : {"gpt-2", "qwen2", "qwen35", "starcoder", "falcon", "deepseek-llm", "default"}) {
    EXPECT_FALSE(pre_tokenizer_from_name(name)->add_bos) << name;
    EXPECT_FALSE(pre_tokenizer_from_name(name)->ignore_merges) << name;
  }
  const Result<PreTokenizerInfo> bad = pre_tokenizer_from_name("deepseek-v3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unsupported pre-tokenizer 'deepseek-v3'"), std::string::npos);
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
  EXPECT_EQ(pre_tokenizer_from_name("starcoder")->rule, k);
  // "a  " is split as a text of its own: its trailing run stays whole.
  EXPECT_EQ(split(k, "a  12 x"), (Words{"a", "  ", "1", "2", " x"}));
  EXPECT_EQ(split(k, "x1y"), (Words{"x", "1", "y"}));
  EXPECT_EQ(split(k, "42"), (Words{"4", "2"}));
  EXPECT_EQ(split(k, "I'm"), (Words{"I", "'m"}));
}

TEST(BpePreTokenizer, Qwen35MarksJoinLetters) {
  const auto k = PreTokenizer::kQwen35;
  // Elsewhere a mark is "other", which may lead a word of letters.
  EXPECT_EQ(split(PreTokenizer::kQwen2, "e\xCC\x81x"), (Words{"e", "\xCC\x81x"}));
  EXPECT_EQ(split(k, "e\xCC\x81x"), (Words{"e\xCC\x81x"}));  // combining acute (Mn)
  // A space before a mark leads the word, as before a letter.
  EXPECT_EQ(split(PreTokenizer::kQwen2, " \xCC\x81x"), (Words{" \xCC\x81", "x"}));
  EXPECT_EQ(split(k, " \xCC\x81x"), (Words{" \xCC\x81x"}));
  EXPECT_EQ(split(k, "x123 I'M"), (Words{"x", "1", "2", "3", " I", "'M"}));
  EXPECT_EQ(split(k, "?\xCC\x81!"), (Words{"?\xCC\x81", "!"}));  // a mark is not punctuation
}

// The multi-regex rules: each pass cuts the words of the one before into its
// matches and the unmatched stretches between them.
TEST(BpePreTokenizer, FalconRule) {
  const auto k = PreTokenizer::kFalcon;
  EXPECT_EQ(split(k, "don't"), (Words{"don", "'", "t"}));  // punctuation goes first
  EXPECT_EQ(split(k, "x 12345"), (Words{"x", " ", "123", "45"}));  // ASCII digits in threes
  EXPECT_EQ(split(k, "a+=b`"), (Words{"a", "+=", "b", "`"}));
  EXPECT_EQ(split(k, "x`!"), (Words{"x", "`!"}));
  EXPECT_EQ(split(k, "\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6"), (Words{"\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6"}));  // not [0-9]
}

TEST(BpePreTokenizer, DefaultRule) {
  const auto k = PreTokenizer::kDefault;
  EXPECT_EQ(split(k, "x`!"), (Words{"x", "`", "!"}));  // no backtick in the first class
  EXPECT_EQ(split(k, "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(split(k, "Hello, world"), (Words{"Hello", ",", " world"}));
}

TEST(BpePreTokenizer, DeepseekCoderRule) {
  const auto k = PreTokenizer::kDeepseekCoder;
  EXPECT_EQ(split(k, "a\r\nb"), (Words{"a", "\r", "\n", "b"}));
  EXPECT_EQ(split(k, " hello, world!!"), (Words{" hello", ",", " world", "!!"}));
  EXPECT_EQ(split(k, "x  12"), (Words{"x", "  ", "1", "2"}));
  EXPECT_EQ(split(k, "\xE4\xB8\xAD\xE6\x96\x87" "abc"), (Words{"\xE4\xB8\xAD\xE6\x96\x87", "abc"}));  // 中文abc: one \p{L} run, then the CJK pass
  EXPECT_EQ(split(k, "a+b"), (Words{"a", "+", "b"}));  // + is a symbol: an unmatched stretch
}

TEST(BpePreTokenizer, DeepseekLlmRule) {
  const auto k = PreTokenizer::kDeepseekLlm;
  EXPECT_EQ(split(k, "Hello World"), (Words{"Hello", " World"}));
  EXPECT_EQ(split(k, "abc!?"), (Words{"abc", "!?"}));
  EXPECT_EQ(split(k, "a1 2"), (Words{"a", "1", " ", "2"}));
  EXPECT_EQ(split(k, "x  "), (Words{"x", "  "}));
  // Georgian Mkhedruli is not in its letter class, but in its CJK ranges.
  EXPECT_EQ(split(k, "ab \xE1\x83\x90\xE1\x83\x91"), (Words{"ab", " ", "\xE1\x83\x90\xE1\x83\x91"}));
  // U+3000 is whitespace to the regexes, never a member of [　-。] or of the
  // CJK ranges: "。　。" would otherwise stay one word.
  EXPECT_EQ(split(k, "\xE3\x80\x82\xE3\x80\x80\xE3\x80\x82"),
            (Words{"\xE3\x80\x82", "\xE3\x80\x80", "\xE3\x80\x82"}));
  EXPECT_EQ(split(k, "a\xE3\x80\x80" "b"), (Words{"a", "\xE3\x80\x80" "b"}));
  // µ is a cased letter: a space joins the next one. ASCII letters are also
  // in the marks class of the next pass, which cuts them off.
  EXPECT_EQ(split(k, "\xC2\xB5 \xC2\xB5"), (Words{"\xC2\xB5", " \xC2\xB5"}));
  EXPECT_EQ(split(k, "\xC2\xB5x"), (Words{"\xC2\xB5", "x"}));
}

}  // namespace
}  // namespace duet
