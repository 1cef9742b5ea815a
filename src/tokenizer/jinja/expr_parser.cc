#include "tokenizer/jinja/expr_parser.h"

#include <algorithm>
#include <functional>

namespace duet::jinja {

Result<ExprPtr> ExprParser::parse_expr() {
  Nest nest(depth_);
  if (nest.too_deep()) return err("expression nested more than ", kMaxNesting, " deep at ", to_string(peek().pos));
  const Pos pos = peek().pos;
  DUET_ASSIGN(ExprPtr then, parse_or());
  if (!at_name("if")) return then;
  ++i_;
  auto e = node(Expr::Kind::kCond, pos);
  DUET_ASSIGN(ExprPtr cond, parse_or());
  e->args.push_back(std::move(cond));
  e->args.push_back(std::move(then));
  if (at_name("else")) {
    ++i_;
    DUET_ASSIGN(ExprPtr other, parse_expr());
    e->args.push_back(std::move(other));
  } else {
    e->args.push_back(nullptr);
  }
  return e;
}

Result<ExprPtr> ExprParser::parse_or() { return parse_left_assoc({"or"}, &ExprParser::parse_and); }

Result<ExprPtr> ExprParser::parse_and() { return parse_left_assoc({"and"}, &ExprParser::parse_not); }

Result<ExprPtr> ExprParser::parse_not() {
  if (!at_name("not")) return parse_compare();
  Nest nest(depth_);
  if (nest.too_deep()) return err("expression nested more than ", kMaxNesting, " deep at ", to_string(peek().pos));
  auto e = node(Expr::Kind::kUnary, peek().pos);
  e->name = "not";
  ++i_;
  DUET_ASSIGN(ExprPtr operand, parse_not());
  e->args.push_back(std::move(operand));
  return e;
}

std::pair<std::string, size_t> ExprParser::compare_op() const {
  for (const char* op : {"==", "!=", "<", ">", "<=", ">="})
    if (at_op(op)) return {op, 1};
  if (at_name("in")) return {"in", 1};
  if (at_name("not") && at_name("in", 1)) return {"not in", 2};
  return {"", 0};
}

Result<ExprPtr> ExprParser::parse_compare() {
  DUET_ASSIGN(ExprPtr l, parse_concat());
  auto [op, n] = compare_op();
  if (op.empty()) return l;
  const Pos pos = peek().pos;
  i_ += n;
  DUET_ASSIGN(ExprPtr r, parse_concat());
  if (!compare_op().first.empty())
    return err("unsupported chained comparison at ", to_string(peek().pos));
  return binary(op, std::move(l), std::move(r), pos);
}

Result<ExprPtr> ExprParser::parse_concat() { return parse_left_assoc({"~"}, &ExprParser::parse_sum); }

Result<ExprPtr> ExprParser::parse_sum() { return parse_left_assoc({"+", "-"}, &ExprParser::parse_product); }

Result<ExprPtr> ExprParser::parse_product() {
  return parse_left_assoc({"*", "/", "//", "%"}, &ExprParser::parse_pow);
}

Result<ExprPtr> ExprParser::parse_pow() { return parse_left_assoc({"**"}, &ExprParser::parse_operand); }

Result<ExprPtr> ExprParser::parse_operand() { return parse_unary(true); }

Result<ExprPtr> ExprParser::parse_left_assoc(std::initializer_list<std::string_view> ops,
                                             Result<ExprPtr> (ExprParser::*operand)()) {
  DUET_ASSIGN(ExprPtr l, (this->*operand)());
  while (true) {
    const Token& tok = peek();
    const bool is_op = tok.kind == Token::Kind::kOp || tok.kind == Token::Kind::kName;
    if (!is_op || std::find(ops.begin(), ops.end(), tok.text) == ops.end()) return l;
    const Pos pos = tok.pos;
    std::string op = t_[i_++].text;
    DUET_ASSIGN(ExprPtr r, (this->*operand)());
    l = binary(std::move(op), std::move(l), std::move(r), pos);
  }
}

Result<ExprPtr> ExprParser::parse_unary(bool with_filters) {
  Nest nest(depth_);
  if (nest.too_deep()) return err("expression nested more than ", kMaxNesting, " deep at ", to_string(peek().pos));
  ExprPtr e;
  if (at_op("-") || at_op("+")) {
    e = node(Expr::Kind::kUnary, peek().pos);
    e->name = t_[i_++].text;
    DUET_ASSIGN(ExprPtr operand, parse_unary(false));
    e->args.push_back(std::move(operand));
  } else {
    DUET_ASSIGN(e, parse_primary());
  }
  DUET_ASSIGN(e, parse_postfix(std::move(e)));
  if (with_filters) {
    DUET_ASSIGN(e, parse_filters(std::move(e)));
  }
  return e;
}

Result<ExprPtr> ExprParser::parse_primary() {
  const Token& tok = peek();
  const Pos pos = tok.pos;
  switch (tok.kind) {
    case Token::Kind::kName: {
      ++i_;
      auto e = node(Expr::Kind::kLiteral, pos);
      if (tok.text == "true" || tok.text == "True") {
        e->value = Value(true);
      } else if (tok.text == "false" || tok.text == "False") {
        e->value = Value(false);
      } else if (tok.text == "none" || tok.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = tok.text;
      }
      return e;
    }
    case Token::Kind::kString: {
      std::string s;
      while (peek().kind == Token::Kind::kString) s += t_[i_++].text;  // adjacent literals join
      auto e = node(Expr::Kind::kLiteral, pos);
      e->value = Value(std::move(s));
      return e;
    }
    case Token::Kind::kInt: {
      auto e = node(Expr::Kind::kLiteral, pos);
      e->value = Value(tok.int_value);
      ++i_;
      return e;
    }
    case Token::Kind::kFloat: {
      auto e = node(Expr::Kind::kLiteral, pos);
      e->value = Value(tok.float_value);
      ++i_;
      return e;
    }
    case Token::Kind::kOp:
      if (tok.text == "(") return parse_parens();
      if (tok.text == "[") return parse_list();
      if (tok.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  return unexpected("an expression");
}

Result<ExprPtr> ExprParser::parse_parens() {
  const Pos pos = peek().pos;
  ++i_;
  if (at_op(")")) {
    ++i_;
    return node(Expr::Kind::kList, pos);
  }
  DUET_ASSIGN(ExprPtr first, parse_expr());
  if (at_op(")")) {
    ++i_;
    return first;
  }
  auto e = node(Expr::Kind::kList, pos);
  e->args.push_back(std::move(first));
  while (at_op(",")) {
    ++i_;
    if (at_op(")")) break;
    DUET_ASSIGN(ExprPtr item, parse_expr());
    e->args.push_back(std::move(item));
  }
  DUET_TRY(expect_op(")"));
  return e;
}

Result<ExprPtr> ExprParser::parse_list() {
  auto e = node(Expr::Kind::kList, peek().pos);
  ++i_;
  DUET_TRY(parse_items("]", [&] { return push_expr(*e); }));
  return e;
}

Result<ExprPtr> ExprParser::parse_dict() {
  auto e = node(Expr::Kind::kDict, peek().pos);
  ++i_;
  DUET_TRY(parse_items("}", [&]() -> Status {
    DUET_TRY(push_expr(*e));  // key
    DUET_TRY(expect_op(":"));
    return push_expr(*e);     // value
  }));
  return e;
}

Status ExprParser::push_expr(Expr& e) {
  DUET_ASSIGN(ExprPtr item, parse_expr());
  e.args.push_back(std::move(item));
  return {};
}

Status ExprParser::parse_items(std::string_view close, const std::function<Status()>& item) {
  while (!at_op(close)) {
    DUET_TRY(item());
    if (!at_op(",")) break;
    ++i_;
  }
  return expect_op(close);
}

Result<ExprPtr> ExprParser::parse_postfix(ExprPtr e) {
  while (true) {
    const Pos pos = peek().pos;
    if (at_op(".")) {
      ++i_;
      if (peek().kind == Token::Kind::kInt) {  // x.0 is x[0]
        auto idx = node(Expr::Kind::kIndex, pos);
        auto lit = node(Expr::Kind::kLiteral, pos);
        lit->value = Value(t_[i_++].int_value);
        idx->args.push_back(std::move(e));
        idx->args.push_back(std::move(lit));
        e = std::move(idx);
        continue;
      }
      auto attr = node(Expr::Kind::kAttr, pos);
      DUET_ASSIGN(attr->name, expect_name());
      attr->args.push_back(std::move(e));
      e = std::move(attr);
    } else if (at_op("[")) {
      ++i_;
      DUET_ASSIGN(e, parse_subscript(std::move(e), pos));
    } else if (at_op("(")) {
      auto call = node(Expr::Kind::kCall, pos);
      call->args.push_back(std::move(e));
      DUET_TRY(parse_call_args(*call));
      e = std::move(call);
    } else {
      return e;
    }
  }
}

Result<ExprPtr> ExprParser::parse_subscript(ExprPtr target, Pos pos) {
  ExprPtr parts[3];
  int n = 0;  // colons seen
  while (true) {
    if (!at_op(":") && !at_op("]")) {
      DUET_ASSIGN(parts[n], parse_expr());
    }
    if (at_op("]")) break;
    if (!at_op(":") || n == 2) return unexpected("':' or ']'");
    ++i_;
    ++n;
  }
  ++i_;
  if (n == 0) {
    if (!parts[0]) return err("empty subscript at ", to_string(pos));
    auto e = node(Expr::Kind::kIndex, pos);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(parts[0]));
    return e;
  }
  auto e = node(Expr::Kind::kSlice, pos);
  e->args.push_back(std::move(target));
  for (auto& p : parts) e->args.push_back(std::move(p));
  return e;
}

Status ExprParser::parse_call_args(Expr& call) {
  DUET_TRY(expect_op("("));
  return parse_items(")", [&]() -> Status {
    if (peek().kind != Token::Kind::kName || !at_op("=", 1)) {
      if (!call.kwargs.empty()) return err("positional argument after keyword argument at ", to_string(peek().pos));
      return push_expr(call);
    }
    std::string key = t_[i_].text;
    i_ += 2;
    DUET_ASSIGN(ExprPtr v, parse_expr());
    call.kwargs.emplace_back(std::move(key), std::move(v));
    return {};
  });
}

Result<ExprPtr> ExprParser::parse_filters(ExprPtr e) {
  while (true) {
    const Pos pos = peek().pos;
    if (at_op("|")) {
      ++i_;
      auto f = node(Expr::Kind::kFilter, pos);
      DUET_ASSIGN(f->name, expect_name());
      f->args.push_back(std::move(e));
      if (at_op("(")) {
        DUET_TRY(parse_call_args(*f));
      }
      e = std::move(f);
    } else if (at_name("is")) {
      ++i_;
      auto t = node(Expr::Kind::kTest, pos);
      if (at_name("not")) {
        t->negated = true;
        ++i_;
      }
      DUET_ASSIGN(t->name, expect_name());
      t->args.push_back(std::move(e));
      if (at_op("(")) {
        DUET_TRY(parse_call_args(*t));
      } else if (takes_bare_test_arg()) {
        DUET_ASSIGN(ExprPtr arg, parse_primary());
        DUET_ASSIGN(arg, parse_postfix(std::move(arg)));
        t->args.push_back(std::move(arg));
      }
      e = std::move(t);
    } else {
      return e;
    }
  }
}

bool ExprParser::takes_bare_test_arg() const {
  const Token& tok = peek();
  if (tok.kind == Token::Kind::kString || tok.kind == Token::Kind::kInt || tok.kind == Token::Kind::kFloat)
    return true;
  if (tok.kind != Token::Kind::kName) return at_op("[") || at_op("{");
  for (const char* kw : {"and", "or", "else", "if", "not", "in", "is"})
    if (tok.text == kw) return false;
  return true;
}

}  // namespace duet::jinja
