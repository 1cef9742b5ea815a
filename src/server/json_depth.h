// The bracket depth of JSON text read one character at a time, strings and
// their escapes skipped: enough to find where a value streamed by a model
// ends without parsing it. Shared by the chat output parser, the stream
// of forced tool calls and the call object reader.
#pragma once

namespace duet::server {

// JSON's insignificant whitespace (RFC 8259).
inline bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

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
