#include "grammar/token_trie.h"

#include <algorithm>
#include <atomic>
#include <numeric>

namespace duet {

namespace {
std::atomic<uint64_t> g_next_serial{1};
}

TokenTrie::TokenTrie(const std::vector<std::string>& bytes, const std::vector<bool>& usable,
                     std::vector<int32_t> end_tokens)
    : end_tokens_(std::move(end_tokens)), bytes_(bytes), serial_(g_next_serial++) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (usable[i] && !bytes[i].empty() && bytes[i].size() < UINT16_MAX) ids.push_back(static_cast<int32_t>(i));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes[static_cast<size_t>(a)] < bytes[static_cast<size_t>(b)];
  });
  // Sorted order is pre-order: each token adds the nodes past its common
  // prefix with the previous token.
  std::vector<uint32_t> path;  // node index per depth-1
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), s.size());
      while (common < n && (*prev)[common] == s[common]) ++common;
    }
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0,
                        static_cast<uint32_t>(token_ids_.size()), 0});
    }
    Node& end = nodes_[path.back()];
    if (end.n_tokens == 0) end.first_token = static_cast<uint32_t>(token_ids_.size());
    token_ids_.push_back(id);
    ++end.n_tokens;
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  // subtree_end: the next node at the same or a shallower depth.
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    while (!open.empty() && nodes_[open.back()].depth >= nodes_[i].depth) {
      nodes_[open.back()].subtree_end = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (uint32_t i : open) nodes_[i].subtree_end = static_cast<uint32_t>(nodes_.size());
}

}  // namespace duet
