// Jinja expressions, one method per precedence level, lowest first: the
// conditional (a if c else b), or, and, not, comparisons, ~, + -, * / // %,
// **, unary signs, then primaries with their postfixes and filters.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja/token_cursor.h"

namespace duet::jinja {

class ExprParser : protected TokenCursor {
 public:
  using TokenCursor::TokenCursor;

 protected:
  Result<ExprPtr> parse_expr();
  // Below the conditional: what `for x in xs if cond` takes as its iterable.
  Result<ExprPtr> parse_or();

 private:
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  // The comparison operator at the cursor ("" if none) and its token count.
  std::pair<std::string, size_t> compare_op() const;
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_sum();
  Result<ExprPtr> parse_product();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_operand();  // a unary expression with its filters
  // operand (op operand)*, grouped from the left; ops are operator or keyword tokens.
  Result<ExprPtr> parse_left_assoc(std::initializer_list<std::string_view> ops,
                                   Result<ExprPtr> (ExprParser::*operand)());
  Result<ExprPtr> parse_unary(bool with_filters);
  Result<ExprPtr> parse_primary();
  // (expr) or a tuple, which behaves as a list here.
  Result<ExprPtr> parse_parens();
  Result<ExprPtr> parse_list();
  Result<ExprPtr> parse_dict();
  // Parses an expression into e's arguments.
  Status push_expr(Expr& e);
  // Comma-separated items up to `close` (a trailing comma allowed), then close itself.
  Status parse_items(std::string_view close, const std::function<Status()>& item);
  Result<ExprPtr> parse_postfix(ExprPtr e);
  Result<ExprPtr> parse_subscript(ExprPtr target, Pos pos);
  // (a, b, key=c) after the callee; fills args (after those already there) and kwargs.
  Status parse_call_args(Expr& call);
  Result<ExprPtr> parse_filters(ExprPtr e);
  // `x is divisibleby 3`, `x is sameas false`: one argument without parentheses.
  bool takes_bare_test_arg() const;
};

}  // namespace duet::jinja
