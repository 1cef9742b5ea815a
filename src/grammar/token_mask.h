// The tokens that may come next: a bitset over the vocabulary, computed by
// walking the token trie with the matcher's stacks, one byte per trie edge,
// dropping a subtree at its first rejected byte. Masks are cached per
// grammar state, since states repeat (inside strings, between items).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/token_trie.h"

namespace duet {

using TokenMask = std::vector<uint64_t>;  // bit id set: token id allowed

inline bool mask_has(const TokenMask& m, int32_t id) {
  return (m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

// Bounded: when full it starts over (states of one generation cluster, so
// the recent ones come back quickly). One per sequence (frame ids are
// local to a matcher's arena): 32 MiB holds ~1700 masks of a 152k
// vocabulary, more states than a long generation visits.
class MaskCache {
 public:
  explicit MaskCache(size_t max_bytes = size_t{32} << 20) : max_bytes_(max_bytes) {}
  std::shared_ptr<const TokenMask> find(uint64_t trie, const GrammarState& s) const;
  void put(uint64_t trie, const GrammarState& s, std::shared_ptr<const TokenMask> mask);
  size_t hits = 0, misses = 0;

 private:
  struct Key {
    uint64_t trie;
    GrammarState state;
    bool operator==(const Key& o) const { return trie == o.trie && state == o.state; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return GrammarStateHash{}(k.state) ^ k.trie; }
  };
  std::unordered_map<Key, std::shared_ptr<const TokenMask>, KeyHash> map_;
  size_t bytes_ = 0, max_bytes_;
};

// The allowed tokens for `m`'s state (cached in m's arena).
std::shared_ptr<const TokenMask> token_mask(const GrammarMatcher& m, const TokenTrie& trie);

// The same without the cache (for tests and benchmarks).
TokenMask compute_token_mask(const GrammarMatcher& m, const TokenTrie& trie);

// Sets row[id] to -inf for every id the mask forbids, and for ids past the
// mask's vocabulary. Returns whether any id of the mask is allowed.
bool apply_token_mask(const TokenMask& mask, int32_t mask_vocab, float* row, int32_t n_vocab);

}  // namespace duet
