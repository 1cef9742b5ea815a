// Byte-level BPE on real vocabularies: tiktoken's r50k_base plans (GPT-2),
// llama3-tokenizer-js's cases (Llama 3), metadata and special tokens.
// llama.cpp's own vectors for every vocabulary are llama_cpp_vocab_test.cc's.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/utf8.h"
#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer_test_util.h"

namespace duet {
namespace {

using Ids = std::vector<int32_t>;
using testing::read_file;

std::string vocab_path(const std::string& name) {
  return testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-" + name + ".gguf");
}

using testing::show;

// tiktoken's r50k_base is GPT-2's vocabulary; specials stay plain text.
TEST(BpeVocab, Gpt2MatchesTiktokenPlans) {
  const auto tok = testing::load_tokenizer(vocab_path("gpt-2"));
  ASSERT_TRUE(tok);
  const std::string plans = read_file(testing::shared_path("tokenizers/gpt2/TestPlans.txt"));
  const std::string head = "EncodingName: r50k_base\nSample: ";
  size_t cases = 0;
  for (size_t pos = plans.find(head); pos != std::string::npos; pos = plans.find(head, pos)) {
    pos += head.size();
    const size_t enc = plans.find("\nEncoded: [", pos);
    ASSERT_NE(enc, std::string::npos);
    const std::string text = plans.substr(pos, enc - pos);
    const size_t close = plans.find(']', enc);
    std::string list = plans.substr(enc + 11, close - enc - 11);
    for (char& c : list) c = c == ',' ? ' ' : c;
    Ids want;
    std::istringstream ids(list);
    for (int32_t id; ids >> id;) want.push_back(id);
    EXPECT_EQ(show(tok->encode(text, false)), show(want)) << "'" << text << "'";
    EXPECT_EQ(tok->decode(want), text);
    ++cases;
    pos = close;
  }
  EXPECT_EQ(cases, 64u);
}

// llama3-tokenizer-js's cases. Its special-token names are Llama 3.1's, which
// the Llama 3.0 vocab here lacks, so rows writing specials in the text are
// left out (PROVENANCE.md); BOS/EOS rows are checked.
TEST(BpeVocab, Llama3MatchesLlama3TokenizerJs) {
  const auto tok = testing::load_tokenizer(vocab_path("llama-bpe"));
  ASSERT_TRUE(tok);
  const auto tests = nlohmann::json::parse(
      read_file(testing::shared_path("tokenizers/llama3/llama3-tokenizer-js_tests.json")));
  size_t cases = 0;
  for (const auto& row : tests.at("encode")) {
    const std::string text = row.at("text");
    if (text.find("<|") != std::string::npos) continue;
    Ids got = tok->encode(text, row.at("bos").get<bool>());
    if (row.at("eos").get<bool>()) got.push_back(tok->eos_id());
    EXPECT_EQ(show(got), show(row.at("ids").get<Ids>())) << "'" << text << "'";
    if (row.value("roundtrip", false)) {
      EXPECT_EQ(tok->decode(got), text);
    }
    ++cases;
  }
  EXPECT_EQ(cases, 19u);
}

TEST(BpeVocab, FileMetadata) {
  const auto gpt2 = testing::load_tokenizer(vocab_path("gpt-2"));
  const auto llama3 = testing::load_tokenizer(vocab_path("llama-bpe"));
  const auto qwen2 = testing::load_tokenizer(vocab_path("qwen2"));
  ASSERT_TRUE(gpt2 && llama3 && qwen2);
  // None of these files sets add_bos_token, so the pre-tokenizer decides, as
  // in llama.cpp: Llama 3 adds BOS, GPT-2 and Qwen2 do not.
  EXPECT_FALSE(gpt2->add_bos_default());
  EXPECT_TRUE(llama3->add_bos_default());
  EXPECT_FALSE(qwen2->add_bos_default());
  // DeepSeek's files say add_bos_token = true.
  const auto deepseek = testing::load_tokenizer(vocab_path("deepseek-llm"));
  ASSERT_TRUE(deepseek);
  EXPECT_TRUE(deepseek->add_bos_default());
  EXPECT_EQ(deepseek->encode("Hi", deepseek->add_bos_default()).front(), 100000);
  EXPECT_FALSE(llama3->strips_leading_space());
  EXPECT_EQ(gpt2->bos_id(), 50256);
  EXPECT_EQ(llama3->encode("Hi", true), (Ids{128000, 13347}));
  // End of generation: EOS and the chat format's end-of-turn, found by name.
  EXPECT_TRUE(llama3->is_end_of_generation(128001));
  EXPECT_TRUE(llama3->is_end_of_generation(128009));  // <|eot_id|>
  EXPECT_FALSE(llama3->is_end_of_generation(128000));
  EXPECT_TRUE(qwen2->is_end_of_generation(151643));  // <|endoftext|>
  EXPECT_TRUE(qwen2->is_end_of_generation(151645));  // <|im_end|>
  EXPECT_FALSE(qwen2->is_end_of_generation(151644));
}

TEST(BpeVocab, SpecialTokensOnlyWhenAsked) {
  const auto tok = testing::load_tokenizer(vocab_path("llama-bpe"));
  ASSERT_TRUE(tok);
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const Ids special = tok->encode(text, false, true);
  EXPECT_EQ(show(special), show(Ids{128006, 882, 128007, 271, 13347, 128009}));
  const Ids plain = tok->encode(text, false, false);
  EXPECT_EQ(plain.front(), 27);  // "<"
  for (int32_t id : plain) EXPECT_LT(id, 128000);
  // Control tokens print as nothing; the plain spelling round-trips.
  EXPECT_EQ(tok->decode(special), "user\n\nHi");
  EXPECT_EQ(tok->decode(plain), text);

  const auto qwen = testing::load_tokenizer(vocab_path("qwen2"));
  ASSERT_TRUE(qwen);
  EXPECT_EQ(show(qwen->encode("<|im_start|>user\nhi<|im_end|>", false, true)),
            show(Ids{151644, 872, 198, 6023, 151645}));
  // User-defined (non-control) added tokens are always matched, as in HF.
  EXPECT_EQ(show(qwen->encode("a[PAD151700]", false, false)), show(Ids{64, 151700}));
  EXPECT_EQ(qwen->decode_piece(151700), "[PAD151700]");
}

// The id of the token whose text is `text`; -1 if none.
int32_t id_of(const Tokenizer& tok, const std::string& text) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.token_text(id) == text) return id;
  }
  return -1;
}

// User-defined tokens (token_type 4) are cut out of the raw text before the
// pre-tokenizer and BPE see it, with or without parse_special, as llama.cpp
// does: MPT's runs of spaces, DeepSeek Coder's chat markers.
TEST(BpeVocab, UserDefinedTokensAreMatchedBeforeBpe) {
  const auto mpt = testing::load_tokenizer(vocab_path("mpt"));
  ASSERT_TRUE(mpt);
  const int32_t spaces24 = id_of(*mpt, std::string(24, ' ')), spaces6 = id_of(*mpt, std::string(6, ' '));
  ASSERT_GE(spaces24, 0);
  ASSERT_GE(spaces6, 0);
  EXPECT_EQ(mpt->token_type(spaces24), TokenType::kUserDefined);
  // 30 spaces: the longest run token, then the rest as one token.
  const std::string text = "a" + std::string(30, ' ') + "b";
  for (bool parse_special : {false, true}) {
    EXPECT_EQ(show(mpt->encode(text, false, parse_special)),
              show(Ids{id_of(*mpt, "a"), spaces24, spaces6, id_of(*mpt, "b")}));
  }
  EXPECT_EQ(mpt->decode(mpt->encode(text, false)), text);

  const auto coder = testing::load_tokenizer(vocab_path("deepseek-coder"));
  ASSERT_TRUE(coder);
  const int32_t user = id_of(*coder, "<|User|>");
  ASSERT_GE(user, 0);
  EXPECT_EQ(coder->token_type(user), TokenType::kUserDefined);
  const Ids ids = coder->encode("x<|User|>y", false, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], user);
  EXPECT_EQ(coder->decode(ids), "x<|User|>y");
}

TEST(BpeVocab, DecodePieceGivesRawBytes) {
  const auto tok = testing::load_tokenizer(vocab_path("gpt-2"));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->token_text(220), "\xC4\xA0");  // "Ġ"
  EXPECT_EQ(tok->decode_piece(220), " ");
  EXPECT_EQ(tok->decode_piece(198), "\n");
  EXPECT_EQ(tok->decode_piece(50256), "");  // <|endoftext|> is control
  EXPECT_EQ(tok->decode_piece(-1), "");
  EXPECT_EQ(tok->decode_piece(50257), "");
  // "🦙" is four bytes spread over tokens that are not UTF-8 on their own.
  const Ids llama = tok->encode("\xF0\x9F\xA6\x99", false);
  ASSERT_GT(llama.size(), 1u);
  EXPECT_EQ(tok->decode(llama), "\xF0\x9F\xA6\x99");
}

TEST(BpeVocab, InvalidUtf8BecomesReplacementCharacters) {
  const auto tok = testing::load_tokenizer(vocab_path("gpt-2"));
  ASSERT_TRUE(tok);
  // A lone continuation byte, and a truncated 3-byte sequence (one maximal
  // subpart): each is one U+FFFD.
  EXPECT_EQ(tok->encode("a\x80" "b", false), tok->encode("a\xEF\xBF\xBD" "b", false));
  EXPECT_EQ(tok->encode("\xE2\x82" "x", false), tok->encode("\xEF\xBF\xBD" "x", false));
  EXPECT_EQ(tok->encode("\xC0\xAF", false), tok->encode("\xEF\xBF\xBD\xEF\xBF\xBD", false));
}

// Any bytes encode, and decode gives back the text with each ill-formed
// subpart as U+FFFD: nothing lost, nothing added.
TEST(BpeVocab, RandomBytesRoundTrip) {
  std::mt19937 rng(5);
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2"}) {
    const auto tok = testing::load_tokenizer(vocab_path(name));
    ASSERT_TRUE(tok);
    for (int n = 0; n < 300; ++n) {
      std::string s(rng() % 48, ' ');
      for (char& c : s) {
        const uint32_t r = rng() % 10;
        c = static_cast<char>(r < 6 ? 0x20 + rng() % 0x5F : r < 7 ? rng() % 0x20 : 0x80 + rng() % 0x80);
      }
      std::vector<uint32_t> cps;
      decode_utf8_lossy(s, cps);
      std::string want;
      for (uint32_t cp : cps) utf8::append(cp, want);
      EXPECT_EQ(tok->decode(tok->encode(s, false)), want) << name;
    }
  }
}

}  // namespace
}  // namespace duet
