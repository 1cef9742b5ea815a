#include "server/forced_call_stream.h"

#include <nlohmann/json.hpp>

namespace duet::server {

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

enum class Match { kMore, kDone, kNo };

// Reads a call object's head, {"name": "<name>", "<key>": {, from `s`;
// kDone with the name when `s` ends at the arguments' '{'.
class HeadReader {
 public:
  explicit HeadReader(std::string_view s) : s_(s) {}

  Match read(std::string& name) {
    Match m;
    if ((m = literal("{")) != Match::kDone || (m = literal("\"name\"")) != Match::kDone ||
        (m = literal(":")) != Match::kDone || (m = string(name)) != Match::kDone ||
        (m = literal(",")) != Match::kDone || (m = key()) != Match::kDone || (m = literal(":")) != Match::kDone ||
        (m = literal("{")) != Match::kDone)
      return m;
    return at_ == s_.size() ? Match::kDone : Match::kNo;
  }

 private:
  void skip_space() {
    while (at_ < s_.size() && is_space(s_[at_])) ++at_;
  }
  Match literal(std::string_view lit) {
    skip_space();
    const std::string_view rest = s_.substr(at_);
    if (rest.size() < lit.size()) return lit.starts_with(rest) ? Match::kMore : Match::kNo;
    if (!rest.starts_with(lit)) return Match::kNo;
    at_ += lit.size();
    return Match::kDone;
  }
  Match key() {
    skip_space();
    const std::string_view rest = s_.substr(at_);
    for (std::string_view k : {"\"arguments\"", "\"parameters\""}) {
      if (rest.size() < k.size() && k.starts_with(rest)) return Match::kMore;
      if (rest.starts_with(k)) {
        at_ += k.size();
        return Match::kDone;
      }
    }
    return Match::kNo;
  }
  // A JSON string, decoded.
  Match string(std::string& out) {
    skip_space();
    if (at_ == s_.size()) return Match::kMore;
    if (s_[at_] != '"') return Match::kNo;
    for (size_t i = at_ + 1; i < s_.size(); ++i) {
      if (s_[i] == '\\') {
        ++i;
      } else if (s_[i] == '"') {
        const auto j = nlohmann::json::parse(s_.substr(at_, i + 1 - at_), nullptr, false);
        if (!j.is_string()) return Match::kNo;
        out = j.get<std::string>();
        at_ = i + 1;
        return Match::kDone;
      }
    }
    return Match::kMore;
  }

  std::string_view s_;
  size_t at_ = 0;
};

}  // namespace

void ForcedCallStream::feed(std::string_view text, std::vector<Event>& out) {
  std::string args;  // this feed's piece of the current call's arguments
  for (char c : text) step(c, args, out);
  if (!args.empty()) out.push_back({Event::kArguments, std::move(args)});
}

std::string ForcedCallStream::finish() {
  if (state_ != State::kHead && state_ != State::kOpaque) return {};
  state_ = State::kOutside;
  return std::move(raw_);
}

void ForcedCallStream::step(char c, std::string& args, std::vector<Event>& out) {
  switch (state_) {
    case State::kOutside:
      if (c == '{') {
        raw_ = "{";
        state_ = State::kHead;
      }
      return;
    case State::kHead: return step_head(c, args, out);
    case State::kArguments:
      args += c;
      depth_.step(c);
      if (depth_.depth == 0) {
        out.push_back({Event::kArguments, std::move(args)});
        args.clear();
        state_ = State::kAfterArguments;
      }
      return;
    case State::kAfterArguments:
      if (c == '}') state_ = State::kOutside;
      return;
    case State::kOpaque:
      raw_ += c;
      depth_.step(c);
      if (depth_.depth == 0) {
        // Not a head duet could read as it came: the object as a whole.
        out.push_back({Event::kWhole, std::move(raw_)});
        raw_.clear();
        state_ = State::kOutside;
      }
      return;
  }
}

void ForcedCallStream::step_head(char c, std::string& args, std::vector<Event>& out) {
  raw_ += c;
  std::string name;
  switch (HeadReader(raw_).read(name)) {
    case Match::kMore: return;
    case Match::kDone:
      out.push_back({Event::kHead, std::move(name)});
      args = "{";
      depth_ = {};
      depth_.depth = 1;
      state_ = State::kArguments;
      return;
    case Match::kNo:
      depth_ = {};
      for (char r : raw_) depth_.step(r);
      state_ = State::kOpaque;
      return;
  }
}

}  // namespace duet::server
