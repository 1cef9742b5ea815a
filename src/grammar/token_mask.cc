#include "grammar/token_mask.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace duet {

std::shared_ptr<const TokenMask> MaskCache::find(uint64_t trie, const GrammarState& s) const {
  auto it = map_.find(Key{trie, s});
  return it == map_.end() ? nullptr : it->second;
}

void MaskCache::put(uint64_t trie, const GrammarState& s, std::shared_ptr<const TokenMask> mask) {
  const size_t cost = mask->size() * sizeof(uint64_t) + s.size() * sizeof(GrammarStack) + 64;
  if (bytes_ + cost > max_bytes_) {
    map_.clear();
    bytes_ = 0;
  }
  if (map_.emplace(Key{trie, s}, std::move(mask)).second) bytes_ += cost;
}

namespace {

// The walk's states and the steps between them, remembered for one walk.
// Most trie nodes lead to a handful of states (inside a string every
// ordinary byte leads back to the same one), so after the first few
// hundred nodes a step is a table lookup instead of an advance.
class WalkSteps {
 public:
  static constexpr int32_t kUnknown = -1, kDead = -2;
  int32_t id(const GrammarState& s) {
    auto [it, fresh] = ids_.emplace(s, static_cast<int32_t>(states_.size()));
    if (fresh) {
      states_.push_back(&it->first);
      next_.resize(next_.size() + 256, kUnknown);
    }
    return it->second;
  }
  const GrammarState& state(int32_t id) const { return *states_[static_cast<size_t>(id)]; }
  int32_t& next(int32_t id, uint8_t byte) { return next_[static_cast<size_t>(id) * 256 + byte]; }

 private:
  std::unordered_map<GrammarState, int32_t, GrammarStateHash> ids_;  // node keys do not move
  std::vector<const GrammarState*> states_;
  std::vector<int32_t> next_;  // 256 per state: the state after that byte
};

}  // namespace

TokenMask compute_token_mask(const GrammarMatcher& m, const TokenTrie& trie) {
  TokenMask mask((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  FrameArena& arena = m.arena();
  StackStepper step(m.grammar(), arena);
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  // at[d]: the state after the first d bytes of the current path.
  std::vector<int32_t> at(trie.max_depth() + 1);
  const size_t mark = arena.size();
  WalkSteps steps;
  GrammarState next;
  at[0] = steps.id(m.state());
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    const int32_t from = at[n.depth - 1];
    int32_t to = steps.next(from, n.byte);
    if (to == WalkSteps::kUnknown) {
      step.advance(steps.state(from), n.byte, true, next);
      to = next.empty() ? WalkSteps::kDead : steps.id(next);
      steps.next(from, n.byte) = to;
    }
    if (to == WalkSteps::kDead) {
      i = n.subtree_end;
      continue;
    }
    at[n.depth] = to;
    for (uint32_t t = 0; t < n.n_tokens; ++t) {
      const int32_t id = ids[n.first_token + t];
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  arena.truncate(mark);
  if (m.can_end())
    for (int32_t id : trie.end_tokens())
      if (id >= 0 && id < trie.n_vocab()) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  return mask;
}

std::shared_ptr<const TokenMask> token_mask(const GrammarMatcher& m, const TokenTrie& trie) {
  MaskCache& cache = m.arena().mask_cache();
  if (auto hit = cache.find(trie.serial(), m.state())) {
    ++cache.hits;
    return hit;
  }
  ++cache.misses;
  auto mask = std::make_shared<const TokenMask>(compute_token_mask(m, trie));
  cache.put(trie.serial(), m.state(), mask);
  return mask;
}

}  // namespace duet

namespace duet {

bool apply_token_mask(const TokenMask& mask, int32_t mask_vocab, float* row, int32_t n_vocab) {
  bool any = false;
  const auto n = static_cast<size_t>(std::min(n_vocab, mask_vocab));
  // Whole words first (a wide fill where nothing is allowed, then only the
  // forbidden bits of the rest): a bit-by-bit pass over 152k ids was a
  // tenth of a millisecond per token.
  const size_t full_words = n / 64;
  for (size_t w = 0; w < full_words; ++w) {
    const uint64_t bits = mask[w];
    float* r = row + w * 64;
    if (bits == 0) {
      std::fill(r, r + 64, -INFINITY);
      continue;
    }
    any = true;
    for (uint64_t forbidden = ~bits; forbidden != 0; forbidden &= forbidden - 1)
      r[__builtin_ctzll(forbidden)] = -INFINITY;
  }
  for (size_t i = full_words * 64; i < n; ++i) {
    if ((mask[i >> 6] >> (i & 63)) & 1)
      any = true;
    else
      row[i] = -INFINITY;
  }
  for (auto i = static_cast<int32_t>(n); i < n_vocab; ++i) row[i] = -INFINITY;
  return any;
}

}  // namespace duet
