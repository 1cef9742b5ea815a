// Tool calls streamed as they are written, for output a grammar forces into
// calls (tool_choice "required" or a named function): every call object
// {"name": "...", "arguments" | "parameters": {...}} is reported as soon as
// its name is complete, then its arguments text piece by piece, as OpenAI
// streams them. Anything between objects (markers, separators, brackets)
// is the format's framing, which the grammar already checked, and is
// skipped. Output that no grammar vouches for is parsed whole instead
// (ChatOutputParser), so that a malformed call can still become content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/json_depth.h"

namespace duet::server {

class ForcedCallStream {
 public:
  struct Event {
    // kWhole: a call object whose head was not in the expected order, given
    // whole once it ends (to be parsed as one, or kept as content).
    enum Kind { kHead, kArguments, kWhole };
    Kind kind;
    std::string text;  // kHead: the function's name; else the text
  };

  void feed(std::string_view text, std::vector<Event>& out);
  // The output has ended: the text of a call object cut before its
  // arguments began (empty if none).
  std::string finish();

 private:
  // Where a '{'-opened JSON value stands: how deep, and inside a string.
  enum class State { kOutside, kHead, kArguments, kAfterArguments, kOpaque };

  void step(char c, std::string& args, std::vector<Event>& out);
  void step_head(char c, std::string& args, std::vector<Event>& out);

  State state_ = State::kOutside;
  std::string raw_;  // kHead, kOpaque: the call object so far
  JsonDepth depth_;      // kArguments: within the arguments; kOpaque: within the object
};

}  // namespace duet::server
