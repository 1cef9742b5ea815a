// Every usable token of a vocabulary as a byte trie, built once per
// vocabulary. Nodes are stored in pre-order with the index just past each
// subtree, so a walk that rejects a byte skips the whole subtree in one step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace duet {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte;
    uint16_t depth;         // 1 for a token's first byte
    uint32_t subtree_end;   // first node after this one's subtree
    uint32_t first_token;   // into token_ids(): the tokens that end here
    uint32_t n_tokens;
  };

  // `bytes[id]` is token id's text as bytes; tokens with `usable[id]`
  // false (control tokens, unused slots) and empty tokens never appear.
  // `end_tokens` (EOS and the like) are allowed exactly when the grammar
  // can end.
  TokenTrie(const std::vector<std::string>& bytes, const std::vector<bool>& usable,
            std::vector<int32_t> end_tokens);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  const std::string& token_bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  size_t max_depth() const { return max_depth_; }
  // Tells tries apart in caches (an address could be reused).
  uint64_t serial() const { return serial_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> end_tokens_;
  std::vector<std::string> bytes_;
  size_t max_depth_ = 0;
  uint64_t serial_;
};

}  // namespace duet
