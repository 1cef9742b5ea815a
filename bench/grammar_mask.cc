// Grammar-constrained decoding costs: the time to compute an allowed-token
// mask for a nested JSON schema at a 32k (Llama 2) and a 152k (Qwen2)
// vocabulary, stepping through a realistic generated document token by
// token (greedy longest allowed token, as a model writing that text would);
// and the compile time of each test schema. Prints a table and one JSON
// line. Vocabularies come from $DUET_SHARED_DIR (default: the build's).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar_vocab.h"
#include "formats/gguf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace duet {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

std::string shared_dir() {
  if (const char* e = std::getenv("DUET_SHARED_DIR")) return e;
  return DUET_SHARED_DIR;
}

const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 1},
    "name": {"type": "string", "minLength": 1, "maxLength": 64},
    "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
    "created": {"type": "string", "format": "date-time"},
    "roles": {"type": "array", "items": {"enum": ["admin", "editor", "viewer"]}, "maxItems": 3},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "geo": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"], "additionalProperties": false}
      },
      "required": ["street", "city"], "additionalProperties": false
    },
    "orders": {"type": "array", "maxItems": 5, "items": {
      "type": "object",
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                     "price": {"type": "number", "minimum": 0}, "gift": {"type": "boolean"}},
      "required": ["sku", "qty", "price"], "additionalProperties": false}},
    "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]}
  },
  "required": ["id", "name", "address", "orders"],
  "additionalProperties": false
})";

const char* kDocument =
    R"({"id": 1042, "name": "Ada Lovelace", "email": "ada.l@example.org", "created": "2024-03-05T14:22:09Z", )"
    R"("roles": ["admin", "viewer"], "address": {"street": "12 Analytical Row", "city": "London", "zip": "10001", )"
    R"("geo": {"lat": 51.5072, "lon": -0.1276}}, "orders": [{"sku": "BAB-001", "qty": 2, "price": 19.99, "gift": false}, )"
    R"({"sku": "ENG-042", "qty": 1, "price": 250}, {"sku": "NOTE-7", "qty": 12, "price": 3.5, "gift": true}], )"
    R"("notes": "Ships in the morning; ring twice."})";

// More schemas for compile times (the shapes the tests use).
const std::vector<std::pair<const char*, const char*>> kSchemas = {
    {"nested", kNestedSchema},
    {"any_object", R"({"type":"object"})"},
    {"person", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false})"},
    {"enum", R"({"enum":["red","green",3,null,{"x":[1]}]})"},
    {"pattern", R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|yz)?$"})"},
    {"date_time", R"({"type":"string","format":"date-time"})"},
    {"integer_range", R"({"type":"integer","minimum":-37,"maximum":1234})"},
    {"array_bounds", R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4})"},
    {"tuple", R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})"},
    {"any_of", R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}]})"},
    {"recursive_tree", R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})"},
    {"long_strings", R"({"type":"object","properties":{"a":{"type":"string","maxLength":2000},"b":{"type":"string","minLength":10,"maxLength":500}}})"},
};

struct WalkResult {
  size_t steps = 0, misses = 0;
  double miss_us = 0, hit_us = 0, apply_us = 0, accept_us = 0, max_us = 0;
  double per_token_us() const { return (miss_us + hit_us + apply_us + accept_us) / static_cast<double>(steps); }
};

struct VocabResult {
  std::string name;
  int32_t n_vocab = 0;
  double trie_ms = 0;
  size_t trie_nodes = 0;
  size_t steps = 0;
  double mask_us_mean = 0, mask_us_max = 0, cached_us_mean = 0, accept_us_mean = 0;
  size_t cache_hits = 0;
  size_t allowed_mean = 0;
  WalkResult walk;
};

size_t popcount(const TokenMask& m) {
  size_t n = 0;
  for (uint64_t w : m) n += static_cast<size_t>(__builtin_popcountll(w));
  return n;
}

// The engine's per-token grammar work while a model writes: each request a
// fresh matcher (and mask cache), each step the cached mask, applied to a
// logits row, then a token drawn uniformly from the allowed ones (as a
// random-weight model sampling at temperature does) and accepted.
int32_t nth_allowed(const TokenMask& mask, size_t k) {
  for (size_t w = 0; w < mask.size(); ++w) {
    const auto c = static_cast<size_t>(__builtin_popcountll(mask[w]));
    if (k >= c) {
      k -= c;
      continue;
    }
    uint64_t bits = mask[w];
    for (; k > 0; --k) bits &= bits - 1;
    return static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
  }
  return -1;
}

WalkResult random_walk(const TokenTrie& trie, const std::shared_ptr<const Grammar>& g, int n_requests, int n_tokens) {
  WalkResult r;
  std::mt19937_64 rng(7);
  std::vector<float> row(static_cast<size_t>(trie.n_vocab()), 0.0f);
  for (int q = 0; q < n_requests; ++q) {
    GrammarMatcher m(g);
    const MaskCache& cache = m.arena().mask_cache();
    for (int t = 0; t < n_tokens && !m.is_complete(); ++t) {
      const size_t misses = cache.misses;
      auto t0 = Clock::now();
      const std::shared_ptr<const TokenMask> mask = token_mask(m, trie);
      const double us = us_since(t0);
      (cache.misses > misses ? r.miss_us : r.hit_us) += us;
      r.misses += cache.misses - misses;
      std::fill(row.begin(), row.end(), 0.0f);
      t0 = Clock::now();
      apply_token_mask(*mask, trie.n_vocab(), row.data(), trie.n_vocab());
      const double apply = us_since(t0);
      r.apply_us += apply;
      const size_t n_allowed = popcount(*mask);
      if (n_allowed == 0) break;
      const int32_t id = nth_allowed(*mask, std::uniform_int_distribution<size_t>(0, n_allowed - 1)(rng));
      const auto& ends = trie.end_tokens();
      if (std::find(ends.begin(), ends.end(), id) != ends.end()) break;
      t0 = Clock::now();
      m.accept_bytes(trie.token_bytes(id));
      const double accept = us_since(t0);
      r.accept_us += accept;
      r.max_us = std::max(r.max_us, us + apply + accept);
      ++r.steps;
    }
  }
  return r;
}

// The longest allowed token that the rest of the document starts with.
int32_t next_token(const TokenTrie& trie, const TokenMask& mask, std::string_view rest) {
  int32_t best = -1;
  size_t best_len = 0;
  const auto& nodes = trie.nodes();
  size_t i = 0, depth = 0;
  while (i < nodes.size() && depth < rest.size()) {
    const TokenTrie::Node& n = nodes[i];
    if (n.depth != depth + 1) break;  // left the path
    if (n.byte != static_cast<uint8_t>(rest[depth])) {
      i = n.subtree_end;
      continue;
    }
    ++depth;
    for (uint32_t t = 0; t < n.n_tokens; ++t) {
      const int32_t id = trie.token_ids()[n.first_token + t];
      if (mask_has(mask, id) && depth > best_len) {
        best = id;
        best_len = depth;
      }
    }
    ++i;
  }
  return best;
}

bool run_vocab(const std::string& name, const std::string& file, std::shared_ptr<const Grammar> g, VocabResult& r) {
  auto gguf = GgufFile::open(file);
  if (!gguf.ok()) {
    std::fprintf(stderr, "%s\n", gguf.error().message.c_str());
    return false;
  }
  auto tok = Tokenizer::from_gguf(*gguf);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return false;
  }
  r.name = name;
  r.n_vocab = (*tok)->n_vocab();
  auto t0 = Clock::now();
  auto trie = make_token_trie(**tok);
  r.trie_ms = us_since(t0) / 1000;
  r.trie_nodes = trie->nodes().size();

  GrammarMatcher m(g);
  const std::string doc = kDocument;
  size_t pos = 0;
  double total = 0, total_cached = 0, total_accept = 0, allowed = 0;
  while (pos < doc.size()) {
    t0 = Clock::now();
    const TokenMask mask = compute_token_mask(m, *trie);
    const double us = us_since(t0);
    t0 = Clock::now();
    auto cached = token_mask(m, *trie);
    total_cached += us_since(t0);
    total += us;
    r.mask_us_max = std::max(r.mask_us_max, us);
    allowed += static_cast<double>(popcount(mask));
    const int32_t id = next_token(*trie, mask, std::string_view(doc).substr(pos));
    if (id < 0) {
      std::fprintf(stderr, "%s: no allowed token at byte %zu\n", name.c_str(), pos);
      return false;
    }
    t0 = Clock::now();
    if (!m.accept_bytes(trie->token_bytes(id))) {
      std::fprintf(stderr, "%s: token %d not accepted at byte %zu\n", name.c_str(), id, pos);
      return false;
    }
    total_accept += us_since(t0);
    pos += trie->token_bytes(id).size();
    ++r.steps;
  }
  r.mask_us_mean = total / static_cast<double>(r.steps);
  r.cached_us_mean = total_cached / static_cast<double>(r.steps);
  r.accept_us_mean = total_accept / static_cast<double>(r.steps);
  r.allowed_mean = static_cast<size_t>(allowed / static_cast<double>(r.steps));
  r.cache_hits = m.arena().mask_cache().hits;
  r.walk = random_walk(*trie, g, 4, 128);
  if (!m.is_complete()) std::fprintf(stderr, "%s: the document did not complete the grammar\n", name.c_str());
  return m.is_complete();
}

int run() {
  const std::string dir = shared_dir() + "/tokenizers/llama.cpp-vocab/";
  auto t0 = Clock::now();
  auto g = json_schema_to_grammar(kNestedSchema);
  const double nested_ms = us_since(t0) / 1000;
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.error().message.c_str());
    return 1;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("nested schema: %zu rules, %zu elements, compiled in %.2f ms\n", (*g)->rules().size(),
              (*g)->elements().size(), nested_ms);
  std::vector<VocabResult> results;
  for (auto [name, file] : {std::pair{"llama2-32k", "ggml-vocab-llama-spm.gguf"}, std::pair{"qwen2-152k", "ggml-vocab-qwen2.gguf"}}) {
    VocabResult r;
    if (!run_vocab(name, dir + file, *g, r)) {
      std::fprintf(stderr, "%s: failed (vocabulary missing or document rejected)\n", name);
      return 1;
    }
    results.push_back(r);
    std::printf("%-11s vocab %6d  trie %7zu nodes %6.1f ms | %zu steps: mask %8.1f us mean %8.1f us max | "
                "cached path %7.1f us mean (%zu hits) | accept %5.2f us | %zu tokens allowed on average\n",
                r.name.c_str(), r.n_vocab, r.trie_nodes, r.trie_ms, r.steps, r.mask_us_mean, r.mask_us_max,
                r.cached_us_mean, r.cache_hits, r.accept_us_mean, r.allowed_mean);
    const WalkResult& w = r.walk;
    std::printf("%-11s sampled walk: %zu tokens, %.1f us/token (max %.0f): %zu misses %.1f us each, hits %.1f us, "
                "apply %.1f us, accept %.2f us per token\n",
                r.name.c_str(), w.steps, w.per_token_us(), w.max_us, w.misses,
                w.misses ? w.miss_us / static_cast<double>(w.misses) : 0.0,
                w.hit_us / static_cast<double>(w.steps - std::min(w.steps, w.misses)),
                w.apply_us / static_cast<double>(w.steps), w.accept_us / static_cast<double>(w.steps));
  }
  std::printf("schema compile times (GBNF generation + grammar compile, best of 5):\n");
  std::string compile_json;
  for (auto [name, schema] : kSchemas) {
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      t0 = Clock::now();
      auto c = json_schema_to_grammar(schema);
      best = std::min(best, us_since(t0) / 1000);
      if (!c.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, c.error().message.c_str());
        return 1;
      }
    }
    std::printf("  %-15s %8.3f ms\n", name, best);
    compile_json += std::string(compile_json.empty() ? "" : ", ") + "\"" + name + "\": " + std::to_string(best);
  }
  std::printf("{\"bench\": \"grammar_mask\", \"vocabularies\": [");
  for (size_t i = 0; i < results.size(); ++i) {
    const VocabResult& r = results[i];
    std::printf("%s{\"name\": \"%s\", \"n_vocab\": %d, \"trie_nodes\": %zu, \"trie_ms\": %.2f, \"steps\": %zu, "
                "\"mask_us_mean\": %.1f, \"mask_us_max\": %.1f, \"cached_mask_us_mean\": %.1f, \"accept_us_mean\": %.2f, "
                "\"walk_us_per_token\": %.1f, \"walk_misses\": %zu, \"walk_steps\": %zu}",
                i ? ", " : "", r.name.c_str(), r.n_vocab, r.trie_nodes, r.trie_ms, r.steps, r.mask_us_mean,
                r.mask_us_max, r.cached_us_mean, r.accept_us_mean, r.walk.per_token_us(), r.walk.misses, r.walk.steps);
  }
  std::printf("], \"compile_ms\": {%s}}\n", compile_json.c_str());
  return 0;
}

}  // namespace
}  // namespace duet

int main() { return duet::run(); }
