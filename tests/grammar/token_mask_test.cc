// The trie walk's allowed-token mask equals a brute-force check of every
// token (clone the matcher, accept the token's bytes) at many states of a
// few grammars, on real vocabularies of 32k and 152k tokens.
#include <gtest/gtest.h>

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

const char* kJson = R"G(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)G";

const char* kJsonText = "{\"name\": \"Zo\xC3\xAB \xE6\x97\xA5\xE6\x9C\xAC\", \"tags\": [\"a\", \"b\\n\"], \"n\": -12.5e3, \"ok\": true}";

TEST(TokenMask, JsonMatchesBruteForceLlama32k) { check_masks("llama-spm", kJson, kJsonText, 3); }
TEST(TokenMask, JsonMatchesBruteForceQwen152k) { check_masks("qwen2", kJson, kJsonText, 7); }

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
