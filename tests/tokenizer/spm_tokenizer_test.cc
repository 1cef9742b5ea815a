// SentencePiece BPE: llama.cpp's test vectors and llama-tokenizer-js's cases on
// the Llama 2 vocab, cases whose expected ids come from python3-sentencepiece,
// and small hand-made vocabularies for the rules the big ones never exercise.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"
#include "core/utf8.h"

namespace duet {
namespace {

using testing::read_file;
using testing::shared_path;
using Ids = std::vector<int32_t>;

using testing::llama_spm;

TEST(SpmTokenizer, LoadsLlamaVocab) {
  const Tokenizer& t = llama_spm();
  EXPECT_EQ(t.n_vocab(), 32000);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.unk_id(), 0);
  EXPECT_TRUE(t.add_bos_default());
  EXPECT_TRUE(t.strips_leading_space());
  EXPECT_EQ(t.token_type(1), TokenType::kControl);
  EXPECT_EQ(t.token_type(13), TokenType::kByte);
  EXPECT_TRUE(t.is_end_of_generation(2));
  EXPECT_FALSE(t.is_end_of_generation(1));
}

// llama-tokenizer-js's cases: encode with BOS, and decode with/without the
// dummy-prefix space (the cases that render BOS as "<s>" are that library's
// own convention and are left out).
TEST(SpmTokenizer, LlamaTokenizerJsCases) {
  const auto j = nlohmann::json::parse(read_file(shared_path("tokenizers/llama2/llama-tokenizer-js_tests.json")));
  size_t n_encode = 0, n_decode = 0;
  for (const auto& c : j.at("encode")) {
    const std::string text = c.at("text");
    const Ids want = c.at("ids");
    EXPECT_EQ(llama_spm().encode(text, true), want) << text;
    EXPECT_EQ(llama_spm().decode(want), text);
    ++n_encode;
  }
  for (const auto& c : j.at("decode")) {
    const Ids ids = c.at("ids");
    const bool bos_is_special = c.at("add_bos_token");
    if (!ids.empty() && ids[0] == llama_spm().bos_id() && !bos_is_special) continue;
    StreamDetokenizer d(llama_spm(), /*first_is_start=*/c.at("add_preceding_space"));
    std::string got;
    for (int32_t id : ids) got += d.push(id);
    got += d.flush();
    EXPECT_EQ(got, c.at("expected").get<std::string>()) << c.dump();
    ++n_decode;
  }
  EXPECT_EQ(n_encode, 12u);
  EXPECT_EQ(n_decode, 6u);
}

TEST(SpmTokenizer, EmptyText) {
  EXPECT_EQ(llama_spm().encode("", false), Ids{});
  EXPECT_EQ(llama_spm().encode("", true), Ids{1});
  EXPECT_EQ(llama_spm().decode({}), "");
  EXPECT_EQ(llama_spm().decode({1}), "");
}

TEST(SpmTokenizer, RoundTrips) {
  for (const std::string& s : std::vector<std::string>{"Hello world", " leading space", "trailing  ", "  two", "\n\nnew\nlines\n", "\ttab", "你好，世界",
        "日本語のテキスト", "🦙 llamas 🐪", "👨‍👩‍👧‍👦", "Crème brûlée", "e\u0301", "<s> not special </s>",
        "def f(x):\n    return x\n", "\xEF\xBF\xBD", std::string(300, ' '), std::string("nul\0in", 6)}) {
    EXPECT_EQ(llama_spm().decode(llama_spm().encode(s, true)), s) << s;
    EXPECT_EQ(llama_spm().decode(llama_spm().encode(s, false)), s) << s;
  }
}

// Arbitrary bytes: encoding never fails, ids are in range, and decoding gives
// the text back with each invalid byte as U+FFFD and '▁' as a space.
TEST(SpmTokenizer, RandomBytesRoundTripAfterSanitizing) {
  std::mt19937 rng(11);
  const std::string alphabet = "ab \n\t\xE4\xB8\xAD\xF0\x9F\xA6\x99\xE2\x96\x81\xFF\xC3<s>";
  for (int trial = 0; trial < 500; ++trial) {
    std::string s;
    const int n = trial % 40;
    for (int i = 0; i < n; ++i) {
      if (rng() % 4 == 0) s += static_cast<char>(rng() % 256);
      else s += alphabet[rng() % alphabet.size()];
    }
    const Ids ids = llama_spm().encode(s, trial % 2 == 0);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < llama_spm().n_vocab());
    std::string want = utf8::sanitize(s);
    for (size_t p; (p = want.find("\xE2\x96\x81")) != std::string::npos;) want.replace(p, 3, " ");
    EXPECT_EQ(llama_spm().decode(ids), want) << "trial " << trial;
  }
}

// Expected ids and texts below were produced by python3-sentencepiece 0.1.97
// with the Llama 2 tokenizer.model.
TEST(SpmTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  // Each byte that starts no valid character is one U+FFFD (id 30140 '�').
  EXPECT_EQ(llama_spm().encode("a\xFF" "b", false), (Ids{263, 30140, 29890}));
  EXPECT_EQ(llama_spm().encode("\xE4\xB8", false), (Ids{29871, 26308}));              // '▁', '��'
  EXPECT_EQ(llama_spm().encode("\xED\xA0\x80", false), (Ids{29871, 26308, 30140}));  // surrogate
  EXPECT_EQ(llama_spm().encode("\xC0\x80", false), (Ids{29871, 26308}));             // overlong
  EXPECT_EQ(llama_spm().encode("\xF4\x90\x80\x80", false), (Ids{29871, 26308, 26308}));
}

TEST(SpmTokenizer, DecodeLikeSentencePiece) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(llama_spm().decode({1, 15043}), "Hello");
  EXPECT_EQ(llama_spm().decode({15043, 29871, 259}), "Hello   ");
  EXPECT_EQ(llama_spm().decode({259, 15043}), "  Hello");
  EXPECT_EQ(llama_spm().decode({13, 15043}), "\n Hello");       // a byte token ends the start
  EXPECT_EQ(llama_spm().decode({29871, 15043}), " Hello");      // only the first piece loses its space
  EXPECT_EQ(llama_spm().decode({1, 2, 15043}), "Hello");        // control tokens don't count
  EXPECT_EQ(llama_spm().decode({0, 15043}), " \xE2\x81\x87  Hello");  // <unk> is " ⁇ "
  EXPECT_EQ(llama_spm().decode({243, 162}), fffd + fffd);     // truncated 4-byte character
  EXPECT_EQ(llama_spm().decode({243, 162, 15043}), fffd + fffd + " Hello");
  EXPECT_EQ(llama_spm().decode({231, 187, 100}), fffd + fffd + "a");
  EXPECT_EQ(llama_spm().decode({-1, 32000, 15043}), "Hello");  // ids outside the vocab are dropped
}

TEST(SpmTokenizer, ParseSpecial) {
  // Without parse_special "<s>" is plain text.
  EXPECT_EQ(llama_spm().encode("<s>hello</s>", false), (Ids{529, 29879, 29958, 12199, 829, 29879, 29958}));
  // With it, control texts become their ids, and the text after one gets the
  // dummy prefix again (llama.cpp).
  EXPECT_EQ(llama_spm().encode("<s>hello</s>", false, true), (Ids{1, 22172, 2}));
  EXPECT_EQ(llama_spm().encode("hello</s>hello", true, true), (Ids{1, 22172, 2, 22172}));
  EXPECT_EQ(llama_spm().encode("</s>", false, true), (Ids{2}));
}

// ---- Hand-made vocabularies -------------------------------------------------

struct Piece {
  std::string text;
  float score;
  TokenType type;
};

std::unique_ptr<Tokenizer> vocab(const testing::TempDir& dir, const std::vector<Piece>& pieces,
                                 bool byte_tokens) {
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (const Piece& p : pieces) {
    texts.push_back(p.text);
    scores.push_back(p.score);
    types.push_back(static_cast<int32_t>(p.type));
  }
  if (byte_tokens) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      texts.push_back(name);
      scores.push_back(0);
      types.push_back(static_cast<int32_t>(TokenType::kByte));
    }
  }
  GgufWriter w;
  w.set("tokenizer.ggml.model", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings(texts));
  w.set("tokenizer.ggml.scores", GgufValue::of_f32s(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::of_i32s(types));
  const std::string path = dir.file("vocab.gguf");
  const Status s = w.write(path);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return testing::load_tokenizer(path);
}

const std::vector<Piece> kSmall = {
    {"<unk>", 0, TokenType::kUnknown}, {"<s>", 0, TokenType::kControl}, {"</s>", 0, TokenType::kControl},
    {"\xE2\x96\x81", 0, TokenType::kNormal}, {"a", 0, TokenType::kNormal}, {"b", 0, TokenType::kNormal},
    {"c", 0, TokenType::kNormal}, {"ab", 10, TokenType::kUnused}, {"abc", 5, TokenType::kNormal},
    {"\xE2\x96\x81" "a", 1, TokenType::kNormal}, {"<b>", 0, TokenType::kUserDefined},
};

// Expected ids checked with python3-sentencepiece on the same pieces (byte
// fallback off): UNUSED pieces take part in merges, then are split back.
TEST(SpmTokenizer, UnusedPiecesMergeThenSplit) {
  testing::TempDir dir;
  auto t = vocab(dir, kSmall, false);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("abc", false), (Ids{3, 8}));     // '▁', 'abc' via the unused 'ab'
  EXPECT_EQ(t->encode("ab", false), (Ids{3, 4, 5}));   // '▁', 'a', 'b'
  EXPECT_EQ(t->encode("a b", false), (Ids{9, 3, 5}));  // '▁a', '▁', 'b'
}

TEST(SpmTokenizer, UnknownRunsBecomeOneUnkWithoutByteTokens) {
  testing::TempDir dir;
  auto t = vocab(dir, kSmall, false);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("xyz", false), (Ids{3, 0}));
  EXPECT_EQ(t->encode("axyzb", false), (Ids{9, 0, 5}));
  EXPECT_EQ(t->decode({0, 0, 4}), " \xE2\x81\x87  \xE2\x81\x87 a");
}

TEST(SpmTokenizer, ByteFallback) {
  testing::TempDir dir;
  auto t = vocab(dir, kSmall, true);
  ASSERT_TRUE(t);
  const int32_t byte0 = static_cast<int32_t>(kSmall.size());
  EXPECT_EQ(t->encode("x\xC3\xA9", false), (Ids{3, byte0 + 'x', byte0 + 0xC3, byte0 + 0xA9}));
  EXPECT_EQ(t->decode(t->encode("x\xC3\xA9", false)), "x\xC3\xA9");
  // "<0x41>" in the text is text, not the byte token.
  EXPECT_EQ(t->encode("<0x41>", false).size(), 7u);
}

TEST(SpmTokenizer, UserDefinedTokensAreAlwaysMatched) {
  testing::TempDir dir;
  auto t = vocab(dir, kSmall, false);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a<b>c", false), (Ids{9, 10, 3, 6}));
  EXPECT_EQ(t->encode("<s>", false, false), (Ids{3, 0}));
  EXPECT_EQ(t->encode("<s>", false, true), (Ids{1}));
  // The unknown token's text is special too (llama.cpp matches it with
  // parse_special); a dummy-prefix space follows it, as after any special.
  EXPECT_EQ(t->encode("<unk>a", false, true), (Ids{0, 9}));
}

// Ties in score go to the leftmost pair: "aaa" merges its first two.
TEST(SpmTokenizer, TiesGoLeftmost) {
  testing::TempDir dir;
  auto t = vocab(dir,
                 {{"<unk>", 0, TokenType::kUnknown}, {"a", 0, TokenType::kNormal},
                  {"aa", 1, TokenType::kNormal}, {"\xE2\x96\x81", 0, TokenType::kNormal}},
                 false);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("aaa", false), (Ids{3, 2, 1}));
}

// Words are encoded one by one only where no piece can span a word's
// start. A piece with '▁' after a character ("a▁") can: then the text is
// one run, and "a b" merges across the space.
TEST(SpmTokenizer, APieceSpanningAWordStartKeepsTheRunWhole) {
  testing::TempDir dir;
  auto t = vocab(dir,
                 {{"<unk>", 0, TokenType::kUnknown}, {"a", 0, TokenType::kNormal}, {"b", 0, TokenType::kNormal},
                  {"\xE2\x96\x81", 0, TokenType::kNormal}, {"\xE2\x96\x81" "a", 1, TokenType::kNormal},
                  {"a\xE2\x96\x81", 5, TokenType::kNormal}},
                 false);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a b", false), (Ids{3, 5, 2}));  // '▁', 'a▁', 'b'
}

// Split into words, a stretch of unknown pieces still becomes one UNK when
// it runs across a word's start.
TEST(SpmTokenizer, AnUnknownStretchAcrossWordsIsOneUnk) {
  testing::TempDir dir;
  auto t = vocab(dir, {{"<unk>", 0, TokenType::kUnknown}, {"a", 0, TokenType::kNormal}}, false);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("x y z", false), (Ids{0}));
  EXPECT_EQ(t->encode("x a y", false), (Ids{0, 1, 0}));
}

// ---- Loading errors ---------------------------------------------------------

std::string load_error(const testing::TempDir& dir, const GgufWriter& w) {
  const std::string path = dir.file("bad.gguf");
  const Status s = w.write(path);
  EXPECT_TRUE(s.ok()) << s.error().message;
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.error().message;
  if (!f) return "";
  auto t = Tokenizer::from_gguf(*f);
  EXPECT_FALSE(t.ok());
  return t ? "" : t.error().message;
}

GgufWriter minimal() {
  GgufWriter w;
  w.set("tokenizer.ggml.model", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"<unk>", "<s>", "</s>", "a"}));
  return w;
}

TEST(SpmTokenizer, MinimalVocabLoads) {
  testing::TempDir dir;
  const std::string path = dir.file("min.gguf");
  ASSERT_TRUE(minimal().write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  auto t = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ((*t)->encode("a", true), (Ids{1, 0, 3}));  // no '▁' piece: UNK, then 'a'
  // SentencePiece vocabularies add BOS unless the file says otherwise (llama.cpp).
  EXPECT_TRUE((*t)->add_bos_default());
  GgufWriter no_bos = minimal();
  no_bos.set("tokenizer.ggml.add_bos_token", GgufValue::of_bool(false));
  const std::string no_bos_path = dir.file("no_bos.gguf");
  ASSERT_TRUE(no_bos.write(no_bos_path).ok());
  auto g = GgufFile::open(no_bos_path);
  ASSERT_TRUE(g.ok());
  auto u = Tokenizer::from_gguf(*g);
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_FALSE((*u)->add_bos_default());
}

TEST(SpmTokenizer, RejectsBadVocabularies) {
  testing::TempDir dir;
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.model", GgufValue::of_string("wordpiece"));
    EXPECT_NE(load_error(dir, w).find("'wordpiece'"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"a"}));
    EXPECT_NE(load_error(dir, w).find("tokenizer.ggml.model"), std::string::npos);
  }
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.scores", GgufValue::of_f32s({0, 0}));
    EXPECT_NE(load_error(dir, w).find("tokenizer.ggml.scores has 2"), std::string::npos);
  }
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.token_type", GgufValue::of_i32s({2, 3, 3, 9}));
    EXPECT_NE(load_error(dir, w).find("token_type[3] = 9"), std::string::npos);
  }
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.token_type", GgufValue::of_i32s({2, 3, 3, 6}));
    EXPECT_NE(load_error(dir, w).find("byte token 3 is 'a'"), std::string::npos);
  }
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.bos_token_id", GgufValue::of_u32(4));
    EXPECT_NE(load_error(dir, w).find("bos_token_id = 4"), std::string::npos);
  }
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.tokens", GgufValue::of_strings({}));
    EXPECT_NE(load_error(dir, w).find("empty"), std::string::npos);
  }
  {
    GgufWriter w = minimal();
    w.set("tokenizer.ggml.add_bos_token", GgufValue::of_u32(1));
    EXPECT_NE(load_error(dir, w).find("add_bos_token"), std::string::npos);
  }
}

}  // namespace
}  // namespace duet
