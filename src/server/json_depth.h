// The bracket depth of JSON text read one character at a time, strings and
// their escapes skipped: enough to find where a value streamed by a model
// ends without parsing it. Shared by the chat output parser and the stream
// of forced tool calls.
#pragma once

namespace duet::server {

struct JsonDepth {
  int depth = 0;
  bool in_string = false, escaped = false;

  void step(char c) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
};

}  // namespace duet::server
