#include "tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string_view>

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

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Result<Body> parse_template() {
    Body body;
    DUET_ASSIGN(const std::string end, parse_body(body, {}));
    (void)end;  // with no end tags, parse_body only returns at the end of input
    return body;
  }

 private:
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

  // ---- statements ----

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

  // ---- expressions, lowest precedence first ----

  Result<ExprPtr> parse_expr() {
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

  Result<ExprPtr> parse_or() {
    DUET_ASSIGN(ExprPtr l, parse_and());
    while (at_name("or")) {
      const Pos pos = peek().pos;
      ++i_;
      DUET_ASSIGN(ExprPtr r, parse_and());
      l = binary("or", std::move(l), std::move(r), pos);
    }
    return l;
  }

  Result<ExprPtr> parse_and() {
    DUET_ASSIGN(ExprPtr l, parse_not());
    while (at_name("and")) {
      const Pos pos = peek().pos;
      ++i_;
      DUET_ASSIGN(ExprPtr r, parse_not());
      l = binary("and", std::move(l), std::move(r), pos);
    }
    return l;
  }

  Result<ExprPtr> parse_not() {
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

  // The comparison operator at the cursor ("" if none) and its token count.
  std::pair<std::string, size_t> compare_op() const {
    for (const char* op : {"==", "!=", "<", ">", "<=", ">="})
      if (at_op(op)) return {op, 1};
    if (at_name("in")) return {"in", 1};
    if (at_name("not") && at_name("in", 1)) return {"not in", 2};
    return {"", 0};
  }

  Result<ExprPtr> parse_compare() {
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

  Result<ExprPtr> parse_concat() {
    DUET_ASSIGN(ExprPtr l, parse_sum());
    while (at_op("~")) {
      const Pos pos = peek().pos;
      ++i_;
      DUET_ASSIGN(ExprPtr r, parse_sum());
      l = binary("~", std::move(l), std::move(r), pos);
    }
    return l;
  }

  Result<ExprPtr> parse_sum() {
    DUET_ASSIGN(ExprPtr l, parse_product());
    while (at_op("+") || at_op("-")) {
      const Pos pos = peek().pos;
      const std::string op = t_[i_++].text;
      DUET_ASSIGN(ExprPtr r, parse_product());
      l = binary(op, std::move(l), std::move(r), pos);
    }
    return l;
  }

  Result<ExprPtr> parse_product() {
    DUET_ASSIGN(ExprPtr l, parse_pow());
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Pos pos = peek().pos;
      const std::string op = t_[i_++].text;
      DUET_ASSIGN(ExprPtr r, parse_pow());
      l = binary(op, std::move(l), std::move(r), pos);
    }
    return l;
  }

  Result<ExprPtr> parse_pow() {
    DUET_ASSIGN(ExprPtr l, parse_unary(true));
    while (at_op("**")) {
      const Pos pos = peek().pos;
      ++i_;
      DUET_ASSIGN(ExprPtr r, parse_unary(true));
      l = binary("**", std::move(l), std::move(r), pos);
    }
    return l;
  }

  Result<ExprPtr> parse_unary(bool with_filters) {
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

  Result<ExprPtr> parse_primary() {
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

  // (expr) or a tuple, which behaves as a list here.
  Result<ExprPtr> parse_parens() {
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

  Result<ExprPtr> parse_list() {
    auto e = node(Expr::Kind::kList, peek().pos);
    ++i_;
    while (!at_op("]")) {
      DUET_ASSIGN(ExprPtr item, parse_expr());
      e->args.push_back(std::move(item));
      if (!at_op(",")) break;
      ++i_;
    }
    DUET_TRY(expect_op("]"));
    return e;
  }

  Result<ExprPtr> parse_dict() {
    auto e = node(Expr::Kind::kDict, peek().pos);
    ++i_;
    while (!at_op("}")) {
      DUET_ASSIGN(ExprPtr key, parse_expr());
      DUET_TRY(expect_op(":"));
      DUET_ASSIGN(ExprPtr value, parse_expr());
      e->args.push_back(std::move(key));
      e->args.push_back(std::move(value));
      if (!at_op(",")) break;
      ++i_;
    }
    DUET_TRY(expect_op("}"));
    return e;
  }

  Result<ExprPtr> parse_postfix(ExprPtr e) {
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

  Result<ExprPtr> parse_subscript(ExprPtr target, Pos pos) {
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

  // (a, b, key=c) after the callee; fills args (after those already there) and kwargs.
  Status parse_call_args(Expr& call) {
    DUET_TRY(expect_op("("));
    while (!at_op(")")) {
      if (peek().kind == Token::Kind::kName && at_op("=", 1)) {
        std::string key = t_[i_].text;
        i_ += 2;
        DUET_ASSIGN(ExprPtr v, parse_expr());
        call.kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!call.kwargs.empty()) return err("positional argument after keyword argument at ", to_string(peek().pos));
        DUET_ASSIGN(ExprPtr v, parse_expr());
        call.args.push_back(std::move(v));
      }
      if (!at_op(",")) break;
      ++i_;
    }
    return expect_op(")");
  }

  Result<ExprPtr> parse_filters(ExprPtr e) {
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

  // `x is divisibleby 3`, `x is sameas false`: one argument without parentheses.
  bool takes_bare_test_arg() const {
    const Token& tok = peek();
    if (tok.kind == Token::Kind::kString || tok.kind == Token::Kind::kInt || tok.kind == Token::Kind::kFloat)
      return true;
    if (tok.kind != Token::Kind::kName) return at_op("[") || at_op("{");
    for (const char* kw : {"and", "or", "else", "if", "not", "in", "is"})
      if (tok.text == kw) return false;
    return true;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace duet::jinja
