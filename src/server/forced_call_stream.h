// Tool calls streamed as they are written, for output a grammar forces into
// JSON call objects (tool_choice "required" or a named function, in the
// Hermes, Llama 3 and older Mistral formats): each call object is read by a
// CallObjectReader, reported as soon as its name is complete and then its
// arguments text piece by piece, exactly as written. Anything between
// objects (markers, separators, brackets) is the format's framing, which
// the grammar already checked, and is skipped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/call_object_reader.h"

namespace duet::server {

class ForcedCallStream {
 public:
  using Event = CallObjectReader::Event;

  void feed(std::string_view text, std::vector<Event>& out);
  // The output has ended: the text of a call object cut before its
  // arguments began (empty if none).
  std::string finish();

 private:
  std::optional<CallObjectReader> call_;  // the call object being read
};

}  // namespace duet::server
