// A vocabulary as the grammar engine sees it: each token's output bytes,
// with control tokens left out and the end-of-generation tokens named, so
// a grammar can allow them exactly when it is complete.
#pragma once

#include <memory>

#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace duet {

std::shared_ptr<const TokenTrie> make_token_trie(const Tokenizer& tok);

}  // namespace duet
