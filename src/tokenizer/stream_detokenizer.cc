#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace duet {

StreamDetokenizer::StreamDetokenizer(const Tokenizer& tok, bool first_is_start)
    : tok_(tok), at_start_(first_is_start) {}

std::string StreamDetokenizer::push(int32_t id) {
  std::string piece = tok_.decode_piece(id);
  // SentencePiece drops the dummy-prefix space of the first piece of a text;
  // control tokens before it (BOS) don't count, any other token does.
  if (at_start_ && id >= 0 && id < tok_.n_vocab() && tok_.token_type(id) != TokenType::kControl) {
    at_start_ = false;
    const TokenType t = tok_.token_type(id);
    const bool textual = t == TokenType::kNormal || t == TokenType::kUserDefined ||
                         t == TokenType::kUnused;
    if (textual && tok_.strips_leading_space() && !piece.empty() && piece[0] == ' ')
      piece.erase(0, 1);
  }
  pending_ += piece;

  // Emit every complete character; an invalid byte becomes U+FFFD right away,
  // the bytes of a character still arriving wait in pending_.
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const utf8::Prefix p = utf8::classify(std::string_view(pending_).substr(i));
    if (p.kind == utf8::Prefix::kIncomplete) break;
    if (p.kind == utf8::Prefix::kInvalid) out += utf8::kReplacement;
    else out.append(pending_, i, p.len);
    i += p.len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDetokenizer::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace duet
