// Byte-level BPE on small vocabularies written here as GGUF files: merge
// order, ignore_merges, added tokens, metadata flags, and the error for each
// kind of bad metadata.
#include <gtest/gtest.h>

#include "core/utf8.h"
#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_unicode.h"

namespace duet {
namespace {

using Ids = std::vector<int32_t>;

// Tokens 0..255 are the bytes in order, then:
constexpr int32_t kAB = 256, kBC = 257, kABC = 258, kEnd = 259, kTool = 260;

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges = {"b c", "a b", "ab c"};
  std::string pre = "gpt-2";

  Vocab() {
    for (int b = 0; b < 256; ++b) {
      std::string s;
      utf8::append(byte_to_codepoint(static_cast<uint8_t>(b)), s);
      tokens.push_back(s);
    }
    for (const char* t : {"ab", "bc", "abc", "<|end|>", "<tool>"}) tokens.push_back(t);
    types.assign(tokens.size(), 1);
    types[kEnd] = 3;   // control
    types[kTool] = 4;  // user-defined
  }

  GgufWriter writer() const {
    GgufWriter w;
    w.set("tokenizer.ggml.model", GgufValue::of_string("gpt2"));
    if (!pre.empty()) w.set("tokenizer.ggml.pre", GgufValue::of_string(pre));
    w.set("tokenizer.ggml.tokens", GgufValue::of_strings(tokens));
    w.set("tokenizer.ggml.token_type", GgufValue::of_i32s(types));
    w.set("tokenizer.ggml.merges", GgufValue::of_strings(merges));
    w.set("tokenizer.ggml.eos_token_id", GgufValue::of_u32(kEnd));
    return w;
  }
};

Result<std::unique_ptr<Tokenizer>> load(const GgufWriter& w) {
  testing::TempDir dir;
  const std::string path = dir.file("vocab.gguf");
  if (Status s = w.write(path); !s.ok()) return s.error();
  DUET_ASSIGN(const GgufFile file, GgufFile::open(path));
  return Tokenizer::from_gguf(file);
}

std::unique_ptr<Tokenizer> load_ok(const GgufWriter& w) {
  auto r = load(w);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : nullptr;
}

// The error message of loading `w`, which must fail.
std::string load_error(const GgufWriter& w) {
  return testing::failure_message(load(w));
}

TEST(BpeSynthetic, MergesApplyInRankOrder) {
  const auto tok = load_ok(Vocab().writer());
  ASSERT_TRUE(tok);
  // "b c" outranks "a b", so "abc" is a + bc, and "ab c" never gets a chance.
  EXPECT_EQ(tok->encode("abc", false), (Ids{'a', kBC}));
  EXPECT_EQ(tok->encode("abab", false), (Ids{kAB, kAB}));
  EXPECT_EQ(tok->encode("abcab", false), (Ids{'a', kBC, kAB}));
  EXPECT_EQ(tok->encode("a b", false), (Ids{'a', ' ', 'b'}));  // byte b is token b here
  EXPECT_EQ(tok->decode(tok->encode("abc abcab\n", false)), "abc abcab\n");
}

// add_bos_token decides; where the file does not say, the pre-tokenizer
// does, as in llama.cpp: the Llama 3 family adds BOS, the others do not.
TEST(BpeSynthetic, BosDefaultFollowsThePreTokenizer) {
  auto add_bos = [](const std::string& pre, int file_says) {
    Vocab v;
    v.pre = pre;
    GgufWriter w = v.writer();
    w.set("tokenizer.ggml.bos_token_id", GgufValue::of_u32(kTool));
    if (file_says >= 0) w.set("tokenizer.ggml.add_bos_token", GgufValue::of_bool(file_says == 1));
    const auto tok = load_ok(w);
    EXPECT_TRUE(tok) << pre;
    if (!tok) return false;
    // encode(add_bos=true) frames with BOS either way; the default is the flag.
    EXPECT_EQ(tok->encode("ab", true).front(), kTool) << pre;
    return tok->add_bos_default();
  };
  EXPECT_TRUE(add_bos("llama-bpe", -1));
  EXPECT_TRUE(add_bos("falcon3", -1));
  EXPECT_FALSE(add_bos("gpt-2", -1));
  EXPECT_FALSE(add_bos("qwen2", -1));
  EXPECT_FALSE(add_bos("deepseek-llm", -1));
  EXPECT_FALSE(add_bos("", -1));  // no tokenizer.ggml.pre: llama.cpp's "default"
  EXPECT_FALSE(add_bos("llama-bpe", 0));
  EXPECT_TRUE(add_bos("gpt-2", 1));
}

TEST(BpeSynthetic, Llama3EmitsWholeWordTokens) {
  Vocab v;
  v.pre = "llama-bpe";
  const auto tok = load_ok(v.writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("abc", false), (Ids{kABC}));  // ignore_merges: the word is a token
  EXPECT_EQ(tok->encode("abcab", false), (Ids{'a', kBC, kAB}));
}

TEST(BpeSynthetic, AddedTokens) {
  const auto tok = load_ok(Vocab().writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("ab<|end|>", false, true), (Ids{kAB, kEnd}));
  EXPECT_NE(tok->encode("ab<|end|>", false, false), (Ids{kAB, kEnd}));
  EXPECT_EQ(tok->encode("ab<tool>ab", false, false), (Ids{kAB, kTool, kAB}));
  EXPECT_EQ(tok->decode_piece(kEnd), "");
  EXPECT_EQ(tok->decode_piece(kTool), "<tool>");
  EXPECT_EQ(tok->token_text(' '), "\xC4\xA0");  // "Ġ"
  EXPECT_EQ(tok->decode_piece(' '), " ");
  // Leftmost match first, and the longest among those starting there.
  Vocab v;
  v.tokens.push_back("<tool>x");
  v.types.push_back(4);
  v.tokens.push_back("l>x");
  v.types.push_back(4);
  const auto longer = load_ok(v.writer());
  ASSERT_TRUE(longer);
  EXPECT_EQ(longer->encode("<tool>x", false), (Ids{261}));
  EXPECT_EQ(longer->encode("<tool>", false), (Ids{kTool}));
  // llama.cpp's order: the longest token takes its occurrences first, even
  // one that starts after a shorter overlapping match ("<to" at 0).
  Vocab w;
  const auto to = static_cast<int32_t>(w.tokens.size()), tool = to + 1;
  for (const char* t : {"<to", "tool!"}) {
    w.tokens.push_back(t);
    w.types.push_back(4);
  }
  const auto ordered = load_ok(w.writer());
  ASSERT_TRUE(ordered);
  EXPECT_EQ(ordered->encode("<tool!", false), (Ids{'<', tool}));
  EXPECT_EQ(ordered->encode("<to<tool!", false), (Ids{to, '<', tool}));
}

TEST(BpeSynthetic, EndOfGenerationAndFlags) {
  Vocab v;
  const auto plain = load_ok(v.writer());
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->is_end_of_generation(kEnd));  // EOS
  EXPECT_FALSE(plain->is_end_of_generation(kTool));
  EXPECT_FALSE(plain->is_end_of_generation(-1));
  EXPECT_FALSE(plain->add_bos_default());  // byte-level BPE: no BOS unless the file asks
  EXPECT_EQ(plain->bos_id(), -1);
  EXPECT_EQ(plain->encode("ab", true), (Ids{kAB}));  // no BOS id to add

  GgufWriter w = v.writer();
  w.set("tokenizer.ggml.bos_token_id", GgufValue::of_u32(kTool));
  w.set("tokenizer.ggml.eot_token_id", GgufValue::of_u32(kABC));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::of_bool(true));
  w.set("tokenizer.ggml.add_eos_token", GgufValue::of_bool(true));
  const auto framed = load_ok(w);
  ASSERT_TRUE(framed);
  EXPECT_TRUE(framed->add_bos_default());
  EXPECT_TRUE(framed->is_end_of_generation(kABC));  // EOT
  EXPECT_EQ(framed->encode("ab", true), (Ids{kTool, kAB, kEnd}));
  EXPECT_EQ(framed->encode("ab", false), (Ids{kAB}));

  // Without tokenizer.ggml.pre, llama.cpp splits with its "default" rule.
  v.pre.clear();
  const auto old = load_ok(v.writer());
  ASSERT_TRUE(old);
  EXPECT_EQ(static_cast<const BpeTokenizer&>(*old).pre_tokenizer(), PreTokenizer::kDefault);
}

TEST(BpeSynthetic, BytesMissingFromTheVocabulary) {
  Vocab v;
  v.tokens[0xE2] = "unused-e2";  // byte 0xE2 has no token now
  const auto tok = load_ok(v.writer());
  ASSERT_TRUE(tok);
  // With no UNK either, the byte is dropped (llama.cpp does the same).
  EXPECT_EQ(tok->encode("a\xE2\x82\xAC", false), (Ids{'a', 0x82, 0xAC}));
  GgufWriter w = v.writer();
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::of_u32(kTool));
  const auto with_unk = load_ok(w);
  ASSERT_TRUE(with_unk);
  EXPECT_EQ(with_unk->encode("a\xE2\x82\xAC", false), (Ids{'a', kTool, 0x82, 0xAC}));
}

TEST(BpeSynthetic, BadMetadataIsAClearError) {
  auto contains = [](const std::string& msg, const std::string& what) {
    return msg.find(what) != std::string::npos;
  };
  {
    GgufWriter w = Vocab().writer();
    w.set("tokenizer.ggml.eos_token_id", GgufValue::of_u32(10000));
    const std::string e = load_error(w);
    EXPECT_TRUE(contains(e, "tokenizer.ggml.eos_token_id = 10000 is not a token id")) << e;
  }
  {
    Vocab v;
    v.merges.push_back("abc");
    const std::string e = load_error(v.writer());
    EXPECT_TRUE(contains(e, "tokenizer.ggml.merges[3] 'abc' is not two tokens")) << e;
  }
  {
    Vocab v;
    v.merges.push_back("a ");
    EXPECT_TRUE(contains(load_error(v.writer()), "tokenizer.ggml.merges[3]"));
  }
  {
    Vocab v;
    v.types.pop_back();
    const std::string e = load_error(v.writer());
    EXPECT_TRUE(contains(e, "tokenizer.ggml.token_type has 260 entries for 261 tokens")) << e;
  }
  {
    Vocab v;
    v.types[5] = 9;
    const std::string e = load_error(v.writer());
    EXPECT_TRUE(contains(e, "tokenizer.ggml.token_type[5] = 9 is not a token type")) << e;
  }
  {
    Vocab v;
    v.pre = "deepseek-v3";
    const std::string e = load_error(v.writer());
    EXPECT_TRUE(contains(e, "unsupported pre-tokenizer 'deepseek-v3'")) << e;
  }
  {
    Vocab v;
    v.tokens.clear();
    v.types.clear();
    EXPECT_TRUE(contains(load_error(v.writer()), "tokenizer.ggml.tokens is empty"));
  }
  {
    GgufWriter w = Vocab().writer();
    w.set("tokenizer.ggml.merges", GgufValue::of_u32(1));
    EXPECT_TRUE(contains(load_error(w), "tokenizer.ggml.merges"));
  }
  {
    GgufWriter w = Vocab().writer();
    w.set("tokenizer.ggml.add_bos_token", GgufValue::of_string("yes"));
    EXPECT_TRUE(contains(load_error(w), "tokenizer.ggml.add_bos_token"));
  }
}

TEST(BpeSynthetic, MergeRulesOutsideTheVocabularyAreIgnored) {
  Vocab v;
  v.merges.insert(v.merges.begin(), "x y");  // "xy" is no token
  const auto tok = load_ok(v.writer());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("xyab", false), (Ids{'x', 'y', kAB}));
}

}  // namespace
}  // namespace duet
