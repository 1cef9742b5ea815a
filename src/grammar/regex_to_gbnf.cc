#include "grammar/regex_to_gbnf.h"

#include <vector>

#include "grammar/gbnf_text.h"
#include "grammar/utf8_ranges.h"

namespace duet {

namespace {

const std::vector<CodeRange> kDigit = {{'0', '9'}};
const std::vector<CodeRange> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<CodeRange> kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};

class RegexParser {
 public:
  RegexParser(std::string_view p, const std::string& json_char) : p_(p), json_char_(json_char) {}

  Result<std::string> parse() {
    bool anchored_start = false, anchored_end = false;
    if (peek() == '^') {
      anchored_start = true;
      ++pos_;
    }
    DUET_ASSIGN(std::string body, parse_alternation(0));
    if (pos_ < p_.size() && p_[pos_] == '$') {
      anchored_end = true;
      ++pos_;
    }
    if (pos_ != p_.size()) return fail("unexpected '", p_[pos_], "'");
    std::string out;
    if (!anchored_start) out += json_char_ + "* ";
    out += "(" + body + ")";
    if (!anchored_end) out += " " + json_char_ + "*";
    return out;
  }

 private:
  char peek() const { return pos_ < p_.size() ? p_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= p_.size(); }

  template <class... Parts>
  Error fail(const Parts&... parts) {
    Error e = err("pattern '", p_, "' at offset ", pos_, ": ", parts...);
    e.code = "json_schema";
    return e;
  }

  Result<std::string> parse_alternation(int depth) {
    if (depth > 64) return fail("groups nested too deeply");
    std::vector<std::string> alts;
    DUET_ASSIGN(std::string first, parse_concat(depth));
    alts.push_back(first);
    while (peek() == '|') {
      ++pos_;
      DUET_ASSIGN(std::string next, parse_concat(depth));
      alts.push_back(next);
    }
    if (alts.size() == 1) return alts[0];
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + (alts[i].empty() ? std::string("\"\"") : alts[i]);
    return out;
  }

  Result<std::string> parse_concat(int depth) {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && pos_ + 1 == p_.size()) break;
      DUET_ASSIGN(std::string atom, parse_atom(depth));
      DUET_ASSIGN(atom, parse_quantifier(atom));
      out += (out.empty() ? "" : " ") + atom;
    }
    return out;
  }

  Result<std::string> parse_quantifier(std::string atom) {
    while (true) {
      const char c = peek();
      std::string q;
      if (c == '*' || c == '+' || c == '?') {
        q = c;
        ++pos_;
      } else if (c == '{') {
        const size_t close = p_.find('}', pos_);
        if (close == std::string_view::npos) return fail("unterminated '{'");
        q = std::string(p_.substr(pos_, close - pos_ + 1));
        for (char d : q.substr(1, q.size() - 2))
          if (!(d >= '0' && d <= '9') && d != ',') return fail("bad repetition '", q, "'");
        pos_ = close + 1;
      } else {
        return atom;
      }
      if (peek() == '?') ++pos_;  // lazy: the same language
      atom = "(" + atom + ")" + q;
    }
  }

  Result<std::string> parse_atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
          pos_ += 2;
        } else {
          return fail("lookaround and named groups are not supported");
        }
      }
      DUET_ASSIGN(std::string inner, parse_alternation(depth + 1));
      if (peek() != ')') return fail("expected ')'");
      ++pos_;
      return "(" + (inner.empty() ? std::string("\"\"") : inner) + ")";
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return chars({{'\n', '\n'}}, true);
    }
    if (c == '^' || c == '$') return fail("anchors are supported only at the start and end");
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail("quantifier with nothing to repeat");
    if (c == '\\') {
      ++pos_;
      return parse_escape_atom();
    }
    DUET_ASSIGN(uint32_t cp, next_code_point());
    return chars({{cp, cp}}, false);
  }

  Result<uint32_t> next_code_point() {
    const auto b = static_cast<uint8_t>(p_[pos_]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > p_.size()) return fail("invalid UTF-8");
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(p_[pos_ + static_cast<size_t>(i)]) & 0x3F);
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  // After a backslash: a class escape or one character.
  Result<std::string> parse_escape_atom() {
    if (at_end()) return fail("pattern ends in '\\'");
    const char k = peek();
    switch (k) {
      case 'd': ++pos_; return chars(kDigit, false);
      case 'D': ++pos_; return chars(kDigit, true);
      case 'w': ++pos_; return chars(kWord, false);
      case 'W': ++pos_; return chars(kWord, true);
      case 's': ++pos_; return chars(kSpace, false);
      case 'S': ++pos_; return chars(kSpace, true);
      default: break;
    }
    DUET_ASSIGN(uint32_t cp, parse_escaped_char());
    return chars({{cp, cp}}, false);
  }

  Result<uint32_t> parse_escaped_char() {
    const char k = p_[pos_++];
    switch (k) {
      case 'n': return uint32_t{'\n'};
      case 't': return uint32_t{'\t'};
      case 'r': return uint32_t{'\r'};
      case 'f': return uint32_t{'\f'};
      case 'v': return uint32_t{'\v'};
      case '0': return uint32_t{0};
      case 'u': case 'x': {
        const size_t n = k == 'u' ? 4 : 2;
        if (pos_ + n > p_.size()) return fail("short \\", k, " escape");
        uint32_t v = 0;
        for (size_t i = 0; i < n; ++i) {
          const char h = p_[pos_++];
          const int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return fail("bad hex digit in \\", k, " escape");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        return v;
      }
      default:
        if ((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || (k >= '1' && k <= '9'))
          return fail("escape '\\", k, "' (backreferences, \\b and the like) is not supported");
        --pos_;
        return next_code_point();
    }
  }

  Result<std::string> parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodeRange> ranges;
    bool first = true;
    while (true) {
      if (at_end()) return fail("unterminated character class");
      if (peek() == ']' && !first) break;
      first = false;
      uint32_t lo;
      if (peek() == '\\') {
        ++pos_;
        if (at_end()) return fail("pattern ends in '\\'");
        const char k = peek();
        const std::vector<CodeRange>* named = k == 'd' ? &kDigit : k == 'w' ? &kWord : k == 's' ? &kSpace : nullptr;
        if (named) {
          ++pos_;
          ranges.insert(ranges.end(), named->begin(), named->end());
          continue;
        }
        if (k == 'D' || k == 'W' || k == 'S') return fail("negated class escape inside a class is not supported");
        if (k == 'b') {
          ++pos_;
          lo = '\b';
        } else {
          DUET_ASSIGN(lo, parse_escaped_char());
        }
      } else {
        DUET_ASSIGN(lo, next_code_point());
      }
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          if (at_end()) return fail("pattern ends in '\\'");
          DUET_ASSIGN(hi, parse_escaped_char());
        } else {
          DUET_ASSIGN(hi, next_code_point());
        }
        if (hi < lo) return fail("reversed range in class");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;  // ']'
    return chars(ranges, negated);
  }

  // The code points of `ranges` (or of everything else), as encoded JSON
  // string content.
  std::string chars(std::vector<CodeRange> ranges, bool negated) {
    ranges = normalize_ranges(std::move(ranges));
    if (negated) ranges = complement_ranges(ranges);
    auto has = [&](uint32_t cp) {
      for (auto [lo, hi] : ranges)
        if (cp >= lo && cp <= hi) return true;
      return false;
    };
    std::vector<std::string> alts;
    // Written as-is: everything but controls, '"' and '\'.
    std::vector<CodeRange> plain;
    for (auto [lo, hi] : ranges) {
      for (auto [a, b] : std::vector<CodeRange>{{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}}) {
        const uint32_t x = std::max(lo, a), y = std::min(hi, b);
        if (x <= y) plain.push_back({x, y});
      }
    }
    if (!plain.empty()) alts.push_back(gbnf_class(plain));
    if (has('"')) alts.push_back(gbnf_literal("\\\""));
    if (has('\\')) alts.push_back(gbnf_literal("\\\\"));
    if (has('\n')) alts.push_back(gbnf_literal("\\n"));
    if (has('\t')) alts.push_back(gbnf_literal("\\t"));
    if (has('\r')) alts.push_back(gbnf_literal("\\r"));
    if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // matches nothing
    return gbnf_group(alts);
  }

  std::string_view p_;
  const std::string& json_char_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, const std::string& json_char) {
  return RegexParser(pattern, json_char).parse();
}

}  // namespace duet
