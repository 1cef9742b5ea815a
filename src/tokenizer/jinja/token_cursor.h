// The parser's place in the token stream, the checks every grammar rule
// makes there, and the node constructors the rules share.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace duet::jinja {

class TokenCursor {
 public:
  explicit TokenCursor(const std::vector<Token>& tokens) : t_(tokens) {}

 protected:
  // Counts recursion so that deep nesting fails instead of overflowing.
  class Nest {
   public:
    explicit Nest(int& depth) : depth_(depth) { ++depth_; }
    ~Nest() { --depth_; }
    bool too_deep() const { return depth_ > kMaxNesting; }

   private:
    int& depth_;
  };

  const Token& peek(size_t k = 0) const {
    const size_t j = i_ + k;
    return j < t_.size() ? t_[j] : t_.back();
  }
  bool at_op(std::string_view op, size_t k = 0) const {
    return peek(k).kind == Token::Kind::kOp && peek(k).text == op;
  }
  bool at_name(std::string_view name, size_t k = 0) const {
    return peek(k).kind == Token::Kind::kName && peek(k).text == name;
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Token::Kind::kText: return "template text";
      case Token::Kind::kEnd: return "end of template";
      case Token::Kind::kString: return "string";
      default: return "'" + t.text + "'";
    }
  }
  Error unexpected(const char* wanted) const {
    return err("expected ", wanted, " but found ", describe(peek()), " at ", to_string(peek().pos));
  }
  Status expect_op(std::string_view op) {
    if (!at_op(op)) return err("expected '", op, "' but found ", describe(peek()), " at ", to_string(peek().pos));
    ++i_;
    return {};
  }
  Status expect_kind(Token::Kind kind, const char* wanted) {
    if (peek().kind != kind) return unexpected(wanted);
    ++i_;
    return {};
  }
  Result<std::string> expect_name() {
    if (peek().kind != Token::Kind::kName) return unexpected("a name");
    return t_[i_++].text;
  }

  static ExprPtr node(Expr::Kind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  static Stmt stmt(Stmt::Kind kind, Pos pos) {
    Stmt s;
    s.kind = kind;
    s.pos = pos;
    return s;
  }
  static ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, Pos pos) {
    auto e = node(Expr::Kind::kBinary, pos);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace duet::jinja
