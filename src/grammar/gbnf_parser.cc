#include "grammar/gbnf_parser.h"

#include <cstdlib>

namespace duet {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits) : s_(text), limits_(limits) {}

  Result<std::vector<GbnfRule>> parse() {
    std::vector<GbnfRule> rules;
    skip_space(true);
    while (!at_end()) {
      if (rules.size() >= limits_.max_rules) return fail("more than ", limits_.max_rules, " rules");
      DUET_ASSIGN(GbnfRule rule, parse_rule());
      rules.push_back(std::move(rule));
      skip_space(true);
    }
    return rules;
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }

  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  template <class... Parts>
  Error fail(const Parts&... parts) {
    Error e = err("grammar parse error at ", line_, ":", col_, ": ", parts...);
    e.code = "grammar";
    return e;
  }

  // Spaces, tabs, comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        advance();
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') advance();
      } else {
        break;
      }
    }
  }

  // After a line break at the top level of a rule, the rule goes on unless
  // the next thing is a new rule (`name ::=`) or the end of the text.
  bool continues_after_newline() const {
    Parser look = *this;
    look.skip_space(true);
    if (look.at_end()) return false;
    size_t p = look.pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    if (p == look.pos_) return true;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
    return s_.compare(p, 3, "::=") != 0;
  }

  void skip_space_in(int depth) {
    skip_space(depth > 0);
    if (depth == 0 && peek() == '\n' && continues_after_newline()) skip_space(true);
  }

  Result<std::string> parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) advance();
    if (pos_ == start) return fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  Result<GbnfRule> parse_rule() {
    GbnfRule rule;
    rule.line = line_;
    rule.col = col_;
    DUET_ASSIGN(rule.name, parse_name());
    skip_space(false);
    if (s_.compare(pos_, 3, "::=") != 0) return fail("expected '::=' after rule name '", rule.name, "'");
    for (int i = 0; i < 3; ++i) advance();
    skip_space(true);
    DUET_ASSIGN(rule.body, parse_alternates(0));
    if (!at_end() && peek() != '\n') return fail("expected end of line after rule '", rule.name, "', found '", peek(), "'");
    return rule;
  }

  Result<GbnfExpr> parse_alternates(int depth) {
    if (depth > limits_.max_depth) return fail("nesting deeper than ", limits_.max_depth);
    GbnfExpr alt;
    alt.kind = GbnfExpr::Kind::kAlt;
    alt.line = line_;
    alt.col = col_;
    DUET_ASSIGN(GbnfExpr first, parse_sequence(depth));
    alt.items.push_back(std::move(first));
    while (peek() == '|') {
      advance();
      skip_space(true);
      DUET_ASSIGN(GbnfExpr next, parse_sequence(depth));
      alt.items.push_back(std::move(next));
    }
    if (alt.items.size() == 1) return std::move(alt.items[0]);
    return alt;
  }

  Result<GbnfExpr> parse_sequence(int depth) {
    GbnfExpr seq;
    seq.kind = GbnfExpr::Kind::kSeq;
    seq.line = line_;
    seq.col = col_;
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')' || c == '\n') break;
      DUET_ASSIGN(GbnfExpr item, parse_item(depth));
      skip_space_in(depth);
      DUET_ASSIGN(item, parse_postfix(std::move(item)));
      seq.items.push_back(std::move(item));
      skip_space_in(depth);
    }
    return seq;
  }

  Result<GbnfExpr> parse_postfix(GbnfExpr item) {
    while (true) {
      const char c = peek();
      int min = 0, max = -1;
      if (c == '*') {
        advance();
      } else if (c == '+') {
        advance();
        min = 1;
      } else if (c == '?') {
        advance();
        max = 1;
      } else if (c == '{') {
        advance();
        DUET_TRY(parse_bounds(min, max));
      } else {
        return item;
      }
      GbnfExpr rep;
      rep.kind = GbnfExpr::Kind::kRepeat;
      rep.line = item.line;
      rep.col = item.col;
      rep.min = min;
      rep.max = max;
      rep.items.push_back(std::move(item));
      item = std::move(rep);
      skip_space(false);
    }
  }

  Result<int> parse_int() {
    skip_space(false);
    const size_t start = pos_;
    long v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > limits_.max_repeat) return fail("repetition count above ", limits_.max_repeat);
      advance();
    }
    if (pos_ == start) return fail("expected a number in '{m,n}'");
    skip_space(false);
    return static_cast<int>(v);
  }

  Status parse_bounds(int& min, int& max) {
    DUET_ASSIGN(min, parse_int());
    if (peek() == '}') {
      advance();
      max = min;
      return {};
    }
    if (peek() != ',') return fail("expected ',' or '}' in repetition");
    advance();
    skip_space(false);
    if (peek() == '}') {
      advance();
      max = -1;
      return {};
    }
    DUET_ASSIGN(max, parse_int());
    if (peek() != '}') return fail("expected '}' to close repetition");
    advance();
    if (max < min) return fail("repetition {", min, ",", max, "} has max below min");
    return {};
  }

  Result<GbnfExpr> parse_item(int depth) {
    GbnfExpr e;
    e.line = line_;
    e.col = col_;
    const char c = peek();
    if (c == '"') {
      e.kind = GbnfExpr::Kind::kLiteral;
      advance();
      while (true) {
        if (at_end() || peek() == '\n') return fail("unterminated string literal");
        if (peek() == '"') break;
        DUET_ASSIGN(uint32_t cp, parse_char());
        append_utf8(cp, e.text);
      }
      advance();
    } else if (c == '[') {
      e.kind = GbnfExpr::Kind::kClass;
      advance();
      if (peek() == '^') {
        e.negated = true;
        advance();
      }
      while (true) {
        if (at_end() || peek() == '\n') return fail("unterminated character class, expected ']'");
        if (peek() == ']') break;
        DUET_ASSIGN(uint32_t lo, parse_char());
        uint32_t hi = lo;
        if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
          advance();
          DUET_ASSIGN(hi, parse_char());
          if (hi < lo) return fail("character range is reversed");
        }
        e.ranges.push_back({lo, hi});
      }
      advance();
    } else if (c == '.') {
      e.kind = GbnfExpr::Kind::kClass;
      e.negated = true;
      advance();
    } else if (c == '(') {
      advance();
      skip_space(true);
      DUET_ASSIGN(e, parse_alternates(depth + 1));
      if (peek() != ')') return fail("expected ')'");
      advance();
    } else if (is_name_char(c)) {
      e.kind = GbnfExpr::Kind::kRef;
      DUET_ASSIGN(e.text, parse_name());
    } else {
      return fail("expected a string, a character class, '.', '(' or a rule name, found '", c, "'");
    }
    return e;
  }

  // One character of a literal or class: a UTF-8 sequence or an escape.
  Result<uint32_t> parse_char() {
    const auto b = static_cast<uint8_t>(peek());
    if (b == '\\') {
      advance();
      const char k = peek();
      if (at_end()) return fail("unterminated escape");
      advance();
      switch (k) {
        case 'n': return uint32_t{'\n'};
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case '\\': return uint32_t{'\\'};
        case '"': return uint32_t{'"'};
        case '[': return uint32_t{'['};
        case ']': return uint32_t{']'};
        case '-': return uint32_t{'-'};
        case '^': return uint32_t{'^'};
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: return fail("unknown escape '\\", k, "'");
      }
    }
    int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0) return fail("invalid UTF-8 byte");
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    advance();
    for (int i = 1; i < n; ++i) {
      const auto c = static_cast<uint8_t>(peek());
      if ((c & 0xC0) != 0x80 || at_end()) return fail("invalid UTF-8 sequence");
      cp = (cp << 6) | (c & 0x3F);
      advance();
    }
    return cp;
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return fail("expected ", digits, " hex digits in escape");
      v = v * 16 + static_cast<uint32_t>(d);
      advance();
    }
    if (v > kMaxCodePoint) return fail("code point above U+10FFFF");
    return v;
  }

  std::string_view s_;
  GbnfLimits limits_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace

Result<std::vector<GbnfRule>> parse_gbnf(std::string_view text, const GbnfLimits& limits) {
  if (text.size() > limits.max_bytes) {
    Error e = err("grammar is ", text.size(), " bytes, above the limit of ", limits.max_bytes);
    e.code = "grammar";
    return e;
  }
  return Parser(text, limits).parse();
}

}  // namespace duet
