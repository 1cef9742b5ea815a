#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "core/utf8.h"

namespace duet::jinja {

std::string to_string(Pos p) { return "line " + std::to_string(p.line) + ":" + std::to_string(p.col); }

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    // keep_trailing_newline is off in Jinja's default environment.
    if (src_.ends_with("\r\n")) {
      src_.remove_suffix(2);
    } else if (src_.ends_with("\n")) {
      src_.remove_suffix(1);
    }
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Result<std::vector<Token>> run() {
    size_t i = 0;
    bool strip_leading = false;
    while (i <= src_.size()) {
      const size_t open = find_open(i);
      const size_t text_end = open == std::string_view::npos ? src_.size() : open;
      std::string_view text = src_.substr(i, text_end - i);
      if (strip_leading) {
        while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
        strip_leading = false;
      }
      if (open != std::string_view::npos) {
        const char kind = src_[open + 1];
        const char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
        if (mod == '-') {
          while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
        } else if (kind != '{' && mod != '+') {
          // lstrip_blocks: spaces and tabs between a line start and the tag.
          size_t j = open;
          while (j > 0 && (src_[j - 1] == ' ' || src_[j - 1] == '\t')) --j;
          if (j == 0 || src_[j - 1] == '\n') text.remove_suffix(std::min(open - j, text.size()));
        }
      }
      if (!text.empty()) push(Token::Kind::kText, std::string(text), text_end - text.size());
      if (open == std::string_view::npos) break;

      const char kind = src_[open + 1];
      if (kind == '#') {
        const size_t close = src_.find("#}", open + 2);
        if (close == std::string_view::npos) return err("unterminated comment opened at ", to_string(pos(open)));
        i = close + 2;
        if (close > open + 2 && src_[close - 1] == '-') {
          strip_leading = true;
        } else {
          i = skip_newline(i);
        }
        continue;
      }
      const bool block = kind == '%';
      push(block ? Token::Kind::kBlockBegin : Token::Kind::kVarBegin, block ? "{%" : "{{", open);
      size_t j = open + 2;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) ++j;
      DUET_ASSIGN(const size_t close, lex_tag(j, block, open, strip_leading));
      i = close;
      if (block && !strip_leading) i = skip_newline(i);
    }
    push(Token::Kind::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    size_t i = from;
    while ((i = src_.find('{', i)) != std::string_view::npos) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
      ++i;
    }
    return std::string_view::npos;
  }

  size_t skip_newline(size_t i) const {
    if (src_.substr(i).starts_with("\r\n")) return i + 2;
    if (i < src_.size() && src_[i] == '\n') return i + 1;
    return i;
  }

  Pos pos(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<int32_t>(it - line_starts_.begin() + 1), static_cast<int32_t>(offset - *it + 1)};
  }

  void push(Token::Kind kind, std::string text, size_t offset) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = pos(offset);
    tokens_.push_back(std::move(t));
  }

  // Lexes the inside of a tag starting at `i`; returns the offset after its
  // closing delimiter and says whether that delimiter strips what follows.
  Result<size_t> lex_tag(size_t i, bool block, size_t open, bool& strip_after) {
    const std::string_view close = block ? "%}" : "}}";
    int depth = 0;  // open brackets: a '}}' inside a dict literal does not close the tag
    while (true) {
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (i >= src_.size())
        return err("unclosed '", block ? "{%" : "{{", "' opened at ", to_string(pos(open)));
      const std::string_view rest = src_.substr(i);
      if (depth == 0 && rest.starts_with("-") && rest.substr(1).starts_with(close)) {
        push(block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, std::string(close), i);
        strip_after = true;
        return i + 3;
      }
      if (depth == 0 && rest.starts_with(close)) {
        push(block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, std::string(close), i);
        strip_after = false;
        return i + 2;
      }
      const char c = src_[i];
      if (is_name_start(c)) {
        size_t j = i;
        while (j < src_.size() && is_name_char(src_[j])) ++j;
        push(Token::Kind::kName, std::string(src_.substr(i, j - i)), i);
        i = j;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        DUET_ASSIGN(i, lex_number(i));
      } else if (c == '\'' || c == '"') {
        DUET_ASSIGN(i, lex_string(i));
      } else {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        size_t len = 0;
        for (const auto op : kTwo)
          if (rest.starts_with(op)) len = 2;
        if (len == 0 && std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) len = 1;
        if (len == 0) return err("unexpected character '", std::string(1, c), "' at ", to_string(pos(i)));
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        push(Token::Kind::kOp, std::string(rest.substr(0, len)), i);
        i += len;
      }
    }
  }

  Result<size_t> lex_number(size_t i) {
    size_t j = i;
    while (j < src_.size() && std::isdigit(static_cast<unsigned char>(src_[j]))) ++j;
    bool is_float = false;
    if (j + 1 < src_.size() && src_[j] == '.' && std::isdigit(static_cast<unsigned char>(src_[j + 1]))) {
      is_float = true;
      ++j;
      while (j < src_.size() && std::isdigit(static_cast<unsigned char>(src_[j]))) ++j;
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        is_float = true;
        j = k;
        while (j < src_.size() && std::isdigit(static_cast<unsigned char>(src_[j]))) ++j;
      }
    }
    const std::string text(src_.substr(i, j - i));
    if (is_float) {
      push(Token::Kind::kFloat, text, i);
      tokens_.back().float_value = std::strtod(text.c_str(), nullptr);
    } else {
      int64_t v = 0;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
      if (r.ec != std::errc()) return err("integer ", text, " out of range at ", to_string(pos(i)));
      push(Token::Kind::kInt, text, i);
      tokens_.back().int_value = v;
    }
    return j;
  }

  // Python string-literal escapes; an unknown escape keeps its backslash.
  Result<size_t> lex_string(size_t i) {
    const char quote = src_[i];
    std::string value;
    size_t j = i + 1;
    while (true) {
      if (j >= src_.size()) return err("unterminated string starting at ", to_string(pos(i)));
      const char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) return err("unterminated string starting at ", to_string(pos(i)));
      const char e = src_[j + 1];
      j += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '0': value += '\0'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          if (j + n > src_.size()) return err("bad \\", std::string(1, e), " escape at ", to_string(pos(j - 2)));
          for (size_t k = 0; k < n; ++k) {
            const char h = src_[j + k];
            if (!std::isxdigit(static_cast<unsigned char>(h)))
              return err("bad \\", std::string(1, e), " escape at ", to_string(pos(j - 2)));
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          j += n;
          utf8::append(cp, value);
          break;
        }
        default:
          value += '\\';
          value += e;
      }
    }
    push(Token::Kind::kString, std::move(value), i);
    return j + 1;
  }

  std::string_view src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace duet::jinja
