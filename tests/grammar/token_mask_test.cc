// The trie walk's allowed-token mask equals a brute-force check of every
// token (clone the matcher, accept the token's bytes) at many states of a
// few grammars, on real vocabularies of 32k and 152k tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "engine/grammar_vocab.h"
#include "formats/gguf.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace duet {
namespace {

struct Vocab {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenTrie> trie;
};

const Vocab& vocab(const std::string& name) {
  static std::map<std::string, Vocab> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Vocab v;
  auto file = GgufFile::open(testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-" + name + ".gguf"));
  EXPECT_TRUE(file.ok());
  if (file.ok()) {
    auto tok = Tokenizer::from_gguf(*file);
    EXPECT_TRUE(tok.ok());
    if (tok.ok()) {
      v.tok = std::move(*tok);
      v.trie = make_token_trie(*v.tok);
    }
  }
  return cache.emplace(name, std::move(v)).first->second;
}

TokenMask brute_force_mask(const GrammarMatcher& m, const Tokenizer& tok, const TokenTrie& trie) {
  TokenMask mask((static_cast<size_t>(tok.n_vocab()) + 63) / 64, 0);
  std::vector<bool> in_trie(static_cast<size_t>(tok.n_vocab()), false);
  for (int32_t id : trie.token_ids()) in_trie[static_cast<size_t>(id)] = true;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    bool ok;
    if (tok.is_end_of_generation(id)) {
      ok = m.can_end();
    } else {
      if (!in_trie[static_cast<size_t>(id)]) continue;
      GrammarMatcher copy = m;
      ok = copy.accept_bytes(trie.token_bytes(id));
    }
    if (ok) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  return mask;
}

size_t popcount(const TokenMask& m) {
  size_t n = 0;
  for (uint64_t w : m) n += static_cast<size_t>(__builtin_popcountll(w));
  return n;
}

// Walks `text` byte by byte and compares the masks every `stride` bytes.
void check_masks(const std::string& vocab_name, const std::string& gbnf, const std::string& text, size_t stride) {
  const Vocab& v = vocab(vocab_name);
  ASSERT_TRUE(v.trie);
  auto g = Grammar::from_gbnf(gbnf);
  ASSERT_TRUE(g.ok()) << g.error().message;
  GrammarMatcher m(*g);
  size_t checked = 0, allowed_total = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i % stride == 0 || i == text.size()) {
      const TokenMask fast = compute_token_mask(m, *v.trie);
      const TokenMask slow = brute_force_mask(m, *v.tok, *v.trie);
      ASSERT_EQ(fast.size(), slow.size());
      for (int32_t id = 0; id < v.tok->n_vocab(); ++id)
        ASSERT_EQ(mask_has(fast, id), mask_has(slow, id))
            << vocab_name << " after '" << text.substr(0, i) << "': token " << id << " '"
            << v.trie->token_bytes(id) << "'";
      // The cached path gives the same mask.
      EXPECT_EQ(*token_mask(m, *v.trie), fast);
      allowed_total += popcount(fast);
      ++checked;
    }
    if (i < text.size()) ASSERT_TRUE(m.accept_bytes(text.substr(i, 1))) << "at byte " << i << " of " << text;
  }
  EXPECT_TRUE(m.can_end());
  // Some states allow many tokens, so the comparison covered real masks.
  EXPECT_GT(allowed_total, checked);
}

const char* kJsonGbnf = R"G(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)G";

const char* kJsonText = "{\"name\": \"Zo\xC3\xAB \xE6\x97\xA5\xE6\x9C\xAC\", \"tags\": [\"a\", \"b\\n\"], \"n\": -12.5e3, \"ok\": true}";

TEST(TokenMask, JsonMatchesBruteForceLlama32k) { check_masks("llama-spm", kJsonGbnf, kJsonText, 3); }
TEST(TokenMask, JsonMatchesBruteForceQwen152k) { check_masks("qwen2", kJsonGbnf, kJsonText, 7); }

TEST(TokenMask, ArithmeticMatchesBruteForce) {
  const char* g = R"G(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")")G";
  check_masks("llama-spm", g, "(12+3)-(4-(5))", 1);
  check_masks("qwen2", g, "(12+3)-(4-(5))", 2);
}

TEST(TokenMask, NonAsciiClassesMatchBruteForce) {
  check_masks("qwen2", "root ::= [а-я ]+ \"!\"", "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80!", 1);
}

TEST(TokenMask, JsonSchemaMatchesBruteForce) {
  auto gbnf = json_schema_to_gbnf(R"({"type":"object","properties":{"id":{"type":"integer","minimum":1,"maximum":500},
    "name":{"type":"string","maxLength":12},"when":{"type":"string","format":"date"},
    "tags":{"type":"array","items":{"enum":["x","yz"]},"maxItems":2}},"required":["id","name"],"additionalProperties":false})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().message;
  const std::string doc = R"({"id": 42, "name": "Ada \"L\"", "when": "2024-02-29", "tags": ["yz", "x"]})";
  check_masks("llama-spm", *gbnf, doc, 2);
  check_masks("qwen2", *gbnf, doc, 5);
}

// Nested rules push return frames inside the walk: tokens of several
// brackets ("[[", "]]", "},{") pass through states the walk has to tell
// apart by their frames, and remembers.
TEST(TokenMask, RecursiveGrammarMatchesBruteForce) {
  const char* g = R"G(root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list | "{" ( "\"" [a-z]+ "\":" item )? "}" | [0-9]+)G";
  const std::string text = R"([[[1,[]],{"ab":[[2]]}],[{}],{"x":{"y":[[[3]]]}}])";
  check_masks("llama-spm", g, text, 1);
  check_masks("qwen2", g, text, 2);
}

// A mask applied to a logits row forbids exactly its cleared bits, in whole
// words, partial words and the tail past the last full word, and every id
// past the mask's vocabulary.
TEST(TokenMask, ApplyForbidsExactlyTheClearedBits) {
  const int32_t mask_vocab = 200, n_vocab = 210;
  TokenMask mask(4, 0);
  mask[1] = ~uint64_t{0};                          // 64..127 all allowed
  mask[2] = 0x8000000000000001ull | (1ull << 17);  // 128, 145, 191
  mask[3] = 0b101;                                 // 192, 194 (200.. is past the vocabulary)
  std::vector<float> row(n_vocab, 1.0f);
  EXPECT_TRUE(apply_token_mask(mask, mask_vocab, row.data(), n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    const bool allowed = id < mask_vocab && mask_has(mask, id);
    EXPECT_EQ(row[static_cast<size_t>(id)], allowed ? 1.0f : -INFINITY) << id;
  }
  std::vector<float> none(n_vocab, 1.0f);
  EXPECT_FALSE(apply_token_mask(TokenMask(4, 0), mask_vocab, none.data(), n_vocab));
  for (float x : none) EXPECT_EQ(x, -INFINITY);
}

TEST(TokenMask, EndTokenOnlyWhenComplete) {
  const Vocab& v = vocab("llama-spm");
  ASSERT_TRUE(v.trie);
  auto g = Grammar::from_gbnf("root ::= \"ab\" \"c\"?");
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(*g);
  const int32_t eos = v.tok->eos_id();
  EXPECT_FALSE(mask_has(*token_mask(m, *v.trie), eos));
  ASSERT_TRUE(m.accept_bytes("ab"));
  auto mask = token_mask(m, *v.trie);
  EXPECT_TRUE(mask_has(*mask, eos));
  EXPECT_FALSE(mask_has(*mask, v.tok->bos_id()));  // a control token never
  EXPECT_EQ(*mask, brute_force_mask(m, *v.tok, *v.trie));
}

TEST(TokenMask, CacheHitsWhenStatesRepeat) {
  const Vocab& v = vocab("llama-spm");
  ASSERT_TRUE(v.trie);
  auto g = Grammar::from_gbnf("root ::= \"[\" ([a-z]+ \",\")* \"]\"");
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.accept_bytes("[ab,"));
  auto first = token_mask(m, *v.trie);
  ASSERT_TRUE(m.accept_bytes("cd,"));
  const size_t hits = m.arena().mask_cache().hits;
  auto second = token_mask(m, *v.trie);
  EXPECT_EQ(m.arena().mask_cache().hits, hits + 1);
  EXPECT_EQ(first.get(), second.get());
}

}  // namespace
}  // namespace duet
