#include "engine/grammar_vocab.h"

namespace duet {

std::shared_ptr<const TokenTrie> make_token_trie(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> usable(static_cast<size_t>(n), false);
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_end_of_generation(id)) {
      ends.push_back(id);
      continue;
    }
    const TokenType t = tok.token_type(id);
    // Text a user could have typed: normal pieces, byte tokens and
    // user-defined tokens; never control tokens or unused slots.
    if (t != TokenType::kNormal && t != TokenType::kByte && t != TokenType::kUserDefined) continue;
    bytes[static_cast<size_t>(id)] = tok.decode_piece(id);
    usable[static_cast<size_t>(id)] = true;
  }
  return std::make_shared<const TokenTrie>(bytes, usable, std::move(ends));
}

}  // namespace duet
