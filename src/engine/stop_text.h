// A request's output as text, released so that a stop string is never
// partly streamed: any tail of the text that could still grow into a stop
// string is held back until the next token decides it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace duet {

class StopText {
 public:
  // continues_prompt: the text follows the prompt's, so the first piece
  // keeps its leading space; false where it starts anew (a chat reply).
  StopText(const Tokenizer& tok, std::vector<std::string> stops, bool continues_prompt = true);

  struct Piece {
    std::string text;      // safe to release now
    bool stopped = false;  // a stop string matched; text ends just before it
  };
  Piece push(int32_t token);
  // Releases what is held at the end of generation.
  Piece finish();

 private:
  Piece release(bool at_end);

  StreamDetokenizer detok_;
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace duet
