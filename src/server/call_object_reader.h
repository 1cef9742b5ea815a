// One tool call read as the model writes it, so that it can stream the way
// OpenAI's do: the call is reported as soon as its name is known, then its
// arguments' text piece by piece. Two shapes: a JSON call object,
// {"name": "...", "arguments" | "parameters": {...}} (Hermes, Llama 3,
// Mistral's older [TOOL_CALLS][...]), or a bare arguments object after a
// head the caller has read itself (Mistral's [TOOL_CALLS]name[ARGS]{...},
// read_mistral_head). A call object whose head is not in that order (the
// arguments first, or arguments given as a string) is handed back whole once
// it ends, for the caller to parse or keep as text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/json_depth.h"

namespace duet::server {

enum class HeadMatch { kMore, kDone, kNo };

// {"name": "<name>", "arguments" | "parameters": { — kDone with the name
// when `s` is exactly that (ending at the arguments' '{'); kMore when `s`
// is the start of one.
HeadMatch read_json_head(std::string_view s, std::string& name);

// name[ARGS] (or name[CALL_ID]id[ARGS], Mistral's form with a call id) and
// the whitespace after it, up to the arguments' '{': kDone with the name
// and `len`, the offset of that '{'.
HeadMatch read_mistral_head(std::string_view s, std::string& name, size_t& len);

class CallObjectReader {
 public:
  struct Event {
    enum Kind { kHead, kArguments, kWhole };
    Kind kind;
    std::string text;  // kHead: the function's name; kArguments: a piece; kWhole: the object's text
  };
  enum class Shape { kCall, kArguments };

  // `minify`: whitespace outside strings is left out of the arguments, so
  // that their pieces add up to what a JSON library prints for the whole
  // (the arguments of a call parsed whole are printed that way).
  explicit CallObjectReader(Shape shape = Shape::kCall, bool minify = false);

  // Reads `text` up to the end of the object (whose first byte must be
  // '{'); returns how many bytes it took.
  size_t feed(std::string_view text, std::vector<Event>& out);

  bool done() const { return state_ == State::kDone; }
  // Still reading a call object's head: nothing reported yet.
  bool reading_head() const { return state_ == State::kHead; }
  bool reported_head() const { return reported_; }
  // The object so far while nothing of it was reported (reading its head,
  // or waiting for the end of one read whole).
  const std::string& unreported() const { return raw_; }

 private:
  enum class State { kHead, kArguments, kAfterArguments, kWhole, kDone };

  void step(char c, std::string& args, std::vector<Event>& out);
  void step_head(char c, std::string& args, std::vector<Event>& out);

  Shape shape_;
  bool minify_;
  State state_;
  bool reported_ = false;
  std::string raw_;  // kHead, kWhole: the object so far
  JsonDepth depth_;  // kArguments: within the arguments; kAfterArguments, kWhole: within the object
};

}  // namespace duet::server
