// Added tokens found in raw text before a vocabulary's model sees it, the way
// llama.cpp's tokenizer_st_partition finds them: tokens are tried longest
// text first (equal lengths: lower id first), each taking every occurrence,
// left to right, in the text that no token tried before it has taken; the
// stretches left between become plain text. Where two candidates overlap,
// the longer one wins even when the shorter starts earlier ("<to" and
// "tool!" in "<tool!" give "<" and "tool!").
//
// User-defined tokens are always matched (Hugging Face and llama.cpp alike);
// control and unknown tokens only with parse_special. A token marked rstrip
// takes the whitespace after it along (the plain text that follows loses its
// leading spaces, tabs and newlines), as Phi-3's do.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace duet {

class SpecialTokens {
 public:
  SpecialTokens() = default;
  // The control, user-defined and unknown tokens among `texts` (one per id,
  // typed by `types`), except those with empty text.
  SpecialTokens(const std::vector<std::string>& texts, const std::vector<TokenType>& types);

  // A stretch [begin, end) of the text: token `id`, or plain text if id < 0.
  struct Piece {
    size_t begin, end;
    int32_t id;
  };
  // Cuts `text` into pieces, in order; appends them to `out`. They cover the
  // text but for whitespace an rstrip token took.
  void partition(std::string_view text, bool parse_special, std::vector<Piece>& out) const;

  // The rules llama.cpp keys on the model's general.name: in a Phi-3 model
  // ("phi-3" or "phi3" in the name, any case) every special token is rstrip
  // but <unk>, <s> and <|endoftext|> (its tokenizer.json marks them so; the
  // GGUF does not carry the flag).
  void apply_model_rules(std::string_view general_name);

 private:
  struct Entry {
    std::string text;
    int32_t id;
    bool always;  // user-defined: matched without parse_special
    bool rstrip = false;
  };
  std::vector<Entry> entries_;                          // the order they are tried in
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // indices into entries_
};

}  // namespace duet
