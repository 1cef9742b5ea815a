#include "tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "tokenizer/jinja/expr_parser.h"

namespace duet::jinja {
namespace {

bool mentions_loop(const Expr& e) {
  if (e.kind == Expr::Kind::kName && e.name == "loop") return true;
  for (const auto& a : e.args)
    if (a && mentions_loop(*a)) return true;
  for (const auto& [_, a] : e.kwargs)
    if (mentions_loop(*a)) return true;
  return false;
}

bool mentions_loop(const Body& body) {
  for (const Stmt& s : body) {
    if ((s.expr && mentions_loop(*s.expr)) || (s.cond && mentions_loop(*s.cond))) return true;
    for (const auto& [cond, b] : s.branches)
      if ((cond && mentions_loop(*cond)) || mentions_loop(b)) return true;
    if (mentions_loop(s.body) || mentions_loop(s.else_body)) return true;
  }
  return false;
}

class Parser : ExprParser {
 public:
  using ExprParser::ExprParser;

  Result<Body> parse_template() {
    Body body;
    DUET_ASSIGN(const std::string end, parse_body(body, {}));
    (void)end;  // with no end tags, parse_body only returns at the end of input
    return body;
  }

 private:
  // Parses statements into `out` until a block tag named in `ends`; returns
  // that name with the tag name consumed, or "" at the end of the input.
  Result<std::string> parse_body(Body& out, std::initializer_list<std::string_view> ends) {
    Nest nest(depth_);
    if (nest.too_deep()) return err("blocks nested more than ", kMaxNesting, " deep at ", to_string(peek().pos));
    while (true) {
      const Token& tok = peek();
      switch (tok.kind) {
        case Token::Kind::kEnd:
          return std::string();
        case Token::Kind::kText: {
          Stmt s = stmt(Stmt::Kind::kText, tok.pos);
          s.text = tok.text;
          out.push_back(std::move(s));
          ++i_;
          break;
        }
        case Token::Kind::kVarBegin: {
          Stmt s = stmt(Stmt::Kind::kOutput, tok.pos);
          ++i_;
          DUET_ASSIGN(s.expr, parse_expr());
          DUET_TRY(expect_kind(Token::Kind::kVarEnd, "'}}'"));
          out.push_back(std::move(s));
          break;
        }
        case Token::Kind::kBlockBegin: {
          const Pos pos = tok.pos;
          ++i_;
          if (peek().kind != Token::Kind::kName) return unexpected("a tag name");
          const std::string tag = peek().text;
          for (const auto end : ends) {
            if (tag == end) {
              ++i_;
              return tag;
            }
          }
          ++i_;
          DUET_TRY(parse_tag(tag, pos, out));
          break;
        }
        default:
          return unexpected("template text or a tag");
      }
    }
  }

  Status parse_tag(const std::string& tag, Pos pos, Body& out) {
    if (tag == "if") return parse_if(pos, out);
    if (tag == "for") return parse_for(pos, out);
    if (tag == "set") return parse_set(pos, out);
    if (tag == "break" || tag == "continue") {
      DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
      out.push_back(stmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, pos));
      return {};
    }
    if (tag == "elif" || tag == "else" || tag.starts_with("end"))
      return err("unexpected '{% ", tag, " %}' at ", to_string(pos));
    return err("unsupported template tag '{% ", tag, " %}' at ", to_string(pos));
  }

  Status parse_if(Pos pos, Body& out) {
    Stmt s = stmt(Stmt::Kind::kIf, pos);
    std::string tag = "elif";
    while (tag == "elif") {
      DUET_ASSIGN(ExprPtr cond, parse_expr());
      DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
      Body body;
      DUET_ASSIGN(tag, parse_body(body, {"elif", "else", "endif"}));
      s.branches.emplace_back(std::move(cond), std::move(body));
    }
    if (tag == "else") {
      DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
      Body body;
      DUET_ASSIGN(tag, parse_body(body, {"endif"}));
      s.branches.emplace_back(nullptr, std::move(body));
    }
    if (tag != "endif") return err("'{% if %}' at ", to_string(pos), " has no '{% endif %}'");
    DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
    out.push_back(std::move(s));
    return {};
  }

  Status parse_for(Pos pos, Body& out) {
    Stmt s = stmt(Stmt::Kind::kFor, pos);
    while (true) {
      DUET_ASSIGN(std::string name, expect_name());
      s.targets.push_back(std::move(name));
      if (!at_op(",")) break;
      ++i_;
    }
    if (!at_name("in")) return unexpected("'in'");
    ++i_;
    // As in Jinja, `for x in xs if cond` filters: the iterable has no `if`.
    DUET_ASSIGN(s.expr, parse_or());
    if (at_name("if")) {
      ++i_;
      DUET_ASSIGN(s.cond, parse_expr());
    }
    if (at_name("recursive")) return err("unsupported 'recursive' loop at ", to_string(peek().pos));
    DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
    DUET_ASSIGN(std::string tag, parse_body(s.body, {"else", "endfor"}));
    if (tag == "else") {
      DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
      DUET_ASSIGN(tag, parse_body(s.else_body, {"endfor"}));
    }
    if (tag != "endfor") return err("'{% for %}' at ", to_string(pos), " has no '{% endfor %}'");
    s.uses_loop = mentions_loop(s.body) || (s.cond && mentions_loop(*s.cond));
    DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
    out.push_back(std::move(s));
    return {};
  }

  Status parse_set(Pos pos, Body& out) {
    Stmt s = stmt(Stmt::Kind::kSet, pos);
    DUET_ASSIGN(std::string name, expect_name());
    s.targets.push_back(std::move(name));
    if (at_op(".")) {
      ++i_;
      DUET_ASSIGN(s.attr, expect_name());
    }
    if (peek().kind == Token::Kind::kBlockEnd)
      return err("unsupported block '{% set ", s.targets[0], " %}...{% endset %}' at ", to_string(pos));
    if (at_op(",")) return err("unsupported tuple assignment in '{% set %}' at ", to_string(pos));
    DUET_TRY(expect_op("="));
    DUET_ASSIGN(s.expr, parse_expr());
    DUET_TRY(expect_kind(Token::Kind::kBlockEnd, "'%}'"));
    out.push_back(std::move(s));
    return {};
  }
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace duet::jinja
