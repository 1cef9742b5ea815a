#include "server/call_object_reader.h"

#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "server/json_depth.h"

namespace duet::server {

namespace {

// A head longer than any real one is read whole instead: re-reading it at
// every byte would cost the square of its length.
constexpr size_t kMaxHeadBytes = 512;
constexpr size_t kMaxNameBytes = 128;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// Reads a head from the start of a string, one part after another.
class HeadReader {
 public:
  explicit HeadReader(std::string_view s) : s_(s) {}

  HeadMatch json_head(std::string& name) {
    HeadMatch m;
    if ((m = literal("{")) != HeadMatch::kDone || (m = literal("\"name\"")) != HeadMatch::kDone ||
        (m = literal(":")) != HeadMatch::kDone || (m = string(name)) != HeadMatch::kDone ||
        (m = literal(",")) != HeadMatch::kDone || (m = one_of({"\"arguments\"", "\"parameters\""})) != HeadMatch::kDone ||
        (m = literal(":")) != HeadMatch::kDone || (m = literal("{")) != HeadMatch::kDone)
      return m;
    return at_ == s_.size() ? HeadMatch::kDone : HeadMatch::kNo;
  }

  HeadMatch mistral_head(std::string& name, size_t& len) {
    skip_space();
    HeadMatch m;
    if ((m = word(name)) != HeadMatch::kDone) return m;
    if ((m = literal("[ARGS]")) == HeadMatch::kMore) return m;
    if (m == HeadMatch::kNo) {
      std::string id;
      if ((m = literal("[CALL_ID]")) != HeadMatch::kDone || (m = word(id)) != HeadMatch::kDone ||
          (m = literal("[ARGS]")) != HeadMatch::kDone)
        return m;
    }
    skip_space();
    if (at_ == s_.size()) return HeadMatch::kMore;
    if (s_[at_] != '{') return HeadMatch::kNo;
    len = at_;
    return HeadMatch::kDone;
  }

 private:
  void skip_space() {
    while (at_ < s_.size() && is_json_space(s_[at_])) ++at_;
  }
  HeadMatch literal(std::string_view lit) { return one_of({lit}); }
  HeadMatch one_of(std::initializer_list<std::string_view> words) {
    skip_space();
    const std::string_view rest = s_.substr(at_);
    for (std::string_view w : words) {
      if (rest.size() < w.size() && w.starts_with(rest)) return HeadMatch::kMore;
      if (rest.starts_with(w)) {
        at_ += w.size();
        return HeadMatch::kDone;
      }
    }
    return HeadMatch::kNo;
  }
  // Letters, digits, '_', '-', '.' up to the next '['.
  HeadMatch word(std::string& out) {
    const size_t start = at_;
    while (at_ < s_.size() && is_name_char(s_[at_]) && at_ - start < kMaxNameBytes) ++at_;
    if (at_ == s_.size()) return at_ - start < kMaxNameBytes ? HeadMatch::kMore : HeadMatch::kNo;
    if (at_ == start || s_[at_] != '[') return HeadMatch::kNo;
    out = std::string(s_.substr(start, at_ - start));
    return HeadMatch::kDone;
  }
  // A JSON string, decoded.
  HeadMatch string(std::string& out) {
    skip_space();
    if (at_ == s_.size()) return HeadMatch::kMore;
    if (s_[at_] != '"') return HeadMatch::kNo;
    for (size_t i = at_ + 1; i < s_.size(); ++i) {
      if (s_[i] == '\\') {
        ++i;
      } else if (s_[i] == '"') {
        const auto j = parse_json(s_.substr(at_, i + 1 - at_));
        if (!j.ok() || !j->is_string()) return HeadMatch::kNo;
        out = j->get<std::string>();
        at_ = i + 1;
        return HeadMatch::kDone;
      }
    }
    return HeadMatch::kMore;
  }

  std::string_view s_;
  size_t at_ = 0;
};

}  // namespace

HeadMatch read_json_head(std::string_view s, std::string& name) { return HeadReader(s).json_head(name); }

HeadMatch read_mistral_head(std::string_view s, std::string& name, size_t& len) {
  return HeadReader(s).mistral_head(name, len);
}

CallObjectReader::CallObjectReader(Shape shape, bool minify)
    : shape_(shape), minify_(minify), state_(shape == Shape::kCall ? State::kHead : State::kArguments) {}

size_t CallObjectReader::feed(std::string_view text, std::vector<Event>& out) {
  std::string args;  // this feed's piece of the arguments
  size_t i = 0;
  while (i < text.size() && state_ != State::kDone) step(text[i++], args, out);
  if (!args.empty()) out.push_back({Event::kArguments, std::move(args)});
  return i;
}

void CallObjectReader::step(char c, std::string& args, std::vector<Event>& out) {
  switch (state_) {
    case State::kHead: return step_head(c, args, out);
    case State::kArguments: {
      const bool in_string = depth_.in_string;
      depth_.step(c);
      if (!(minify_ && !in_string && is_json_space(c))) args += c;
      if (depth_.depth > 0) return;
      out.push_back({Event::kArguments, std::move(args)});
      args.clear();
      depth_ = {};
      depth_.depth = 1;  // within the call object
      state_ = shape_ == Shape::kCall ? State::kAfterArguments : State::kDone;
      return;
    }
    case State::kAfterArguments:
      depth_.step(c);
      if (depth_.depth == 0) state_ = State::kDone;
      return;
    case State::kWhole:
      raw_ += c;
      depth_.step(c);
      if (depth_.depth > 0) return;
      out.push_back({Event::kWhole, std::move(raw_)});
      raw_.clear();
      state_ = State::kDone;
      return;
    case State::kDone: return;
  }
}

void CallObjectReader::step_head(char c, std::string& args, std::vector<Event>& out) {
  raw_ += c;
  std::string name;
  HeadMatch m = read_json_head(raw_, name);
  if (m == HeadMatch::kMore && raw_.size() > kMaxHeadBytes) m = HeadMatch::kNo;
  switch (m) {
    case HeadMatch::kMore: return;
    case HeadMatch::kDone:
      out.push_back({Event::kHead, std::move(name)});
      reported_ = true;
      raw_.clear();
      args.assign(1, '{');  // (not = "{": GCC 12 warns -Wrestrict wrongly)
      depth_ = {};
      depth_.depth = 1;
      state_ = State::kArguments;
      return;
    case HeadMatch::kNo:
      // Not a head read in order: the object is taken whole once it ends.
      depth_ = {};
      for (char r : raw_) depth_.step(r);
      state_ = State::kWhole;
      if (depth_.depth > 0) return;
      // It ended with the byte that gave it away.
      out.push_back({Event::kWhole, std::move(raw_)});
      raw_.clear();
      state_ = State::kDone;
      return;
  }
}

}  // namespace duet::server
