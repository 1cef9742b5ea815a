// The streaming detokenizer never emits part of a UTF-8 character, and what it
// emits in total is exactly what decode() gives for the whole sequence.
#include <gtest/gtest.h>

#include <random>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"
#include "core/utf8.h"

namespace duet {
namespace {

using Ids = std::vector<int32_t>;

using testing::llama_spm;

bool whole_characters(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const utf8::Prefix p = utf8::classify(std::string_view(s).substr(i));
    if (p.kind != utf8::Prefix::kValid) return false;
    i += p.len;
  }
  return true;
}

// Pushes every id, checking each chunk; returns the chunks.
std::vector<std::string> stream(const Ids& ids, bool first_is_start = true) {
  StreamDetokenizer d(llama_spm(), first_is_start);
  std::vector<std::string> chunks;
  for (int32_t id : ids) {
    chunks.push_back(d.push(id));
    EXPECT_TRUE(whole_characters(chunks.back())) << "after id " << id;
  }
  chunks.push_back(d.flush());
  EXPECT_TRUE(whole_characters(chunks.back()));
  return chunks;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

TEST(StreamDetokenizer, HoldsBytesUntilTheCharacterIsComplete) {
  // "🦙" is '▁' then four byte tokens.
  const Ids ids = llama_spm().encode("🦙", true);
  ASSERT_EQ(ids, (Ids{1, 29871, 243, 162, 169, 156}));
  const auto chunks = stream(ids);
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "", "", "🦙", ""}));
}

TEST(StreamDetokenizer, EmojiAndCjkSplitAcrossByteTokens) {
  for (const std::string text : {"Ꙋ🦙 mixed 你好 🐪🐫 in 日本語 👨‍👩‍👧‍👦!", "🦙🦙🦙", "龍\n🦙\t"}) {
    const Ids ids = llama_spm().encode(text, true);
    EXPECT_EQ(join(stream(ids)), text);
  }
}

TEST(StreamDetokenizer, FirstIsStartStripsOnlyTheDummyPrefix) {
  const Ids ids = llama_spm().encode("Hello world", true);  // <s> ▁Hello ▁world
  EXPECT_EQ(join(stream(ids, true)), "Hello world");
  // A continuation (generated tokens after a prompt) keeps its space.
  EXPECT_EQ(join(stream({15043, 3186}, false)), " Hello world");
}

TEST(StreamDetokenizer, FlushTurnsLeftoversIntoReplacementCharacters) {
  StreamDetokenizer d(llama_spm());
  EXPECT_EQ(d.push(243), "");  // 0xF0
  EXPECT_EQ(d.push(162), "");  // 0x9F
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDetokenizer, InvalidBytesComeOutAtOnce) {
  StreamDetokenizer d(llama_spm());
  EXPECT_EQ(d.push(258), "\xEF\xBF\xBD");  // <0xFF> can never start a character
  EXPECT_EQ(d.push(231), "");              // <0xE4> might
  EXPECT_EQ(d.push(100), "\xEF\xBF\xBD" "a");  // ...but 'a' ends it
}

// Random id sequences, including lone and misordered byte tokens: the chunks
// are always whole characters and add up to the pieces' bytes with each
// invalid byte replaced.
TEST(StreamDetokenizer, RandomIdsGiveWholeCharacters) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any(0, llama_spm().n_vocab() - 1);
  std::uniform_int_distribution<int32_t> byte(3, 258);
  for (int trial = 0; trial < 300; ++trial) {
    Ids ids;
    const int n = 1 + trial % 17;
    for (int i = 0; i < n; ++i) ids.push_back(rng() % 2 ? byte(rng) : any(rng));
    std::string bytes;
    for (int32_t id : ids) bytes += llama_spm().decode_piece(id);
    EXPECT_EQ(join(stream(ids, /*first_is_start=*/false)), utf8::sanitize(bytes));
  }
}

}  // namespace
}  // namespace duet
