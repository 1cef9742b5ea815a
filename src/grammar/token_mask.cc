#include "grammar/token_mask.h"

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

TokenMask compute_token_mask(const GrammarMatcher& m, const TokenTrie& trie) {
  TokenMask mask((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  FrameArena& arena = m.arena();
  StackStepper step(m.grammar(), arena);
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  // levels[d]: the stacks after the first d bytes of the current path;
  // marks[d]: the arena size then, so deeper scratch frames can be dropped.
  std::vector<GrammarState> levels(trie.max_depth() + 1);
  std::vector<size_t> marks(trie.max_depth() + 1);
  levels[0] = m.state();
  marks[0] = arena.size();
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    arena.truncate(marks[n.depth - 1]);
    GrammarState& next = levels[n.depth];
    step.advance(levels[n.depth - 1], n.byte, true, next);
    if (next.empty()) {
      i = n.subtree_end;
      continue;
    }
    marks[n.depth] = arena.size();
    for (uint32_t t = 0; t < n.n_tokens; ++t) {
      const int32_t id = ids[n.first_token + t];
      mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  arena.truncate(marks[0]);
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
