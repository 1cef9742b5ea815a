#include "tokenizer/jinja/evaluator.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/strings.h"

namespace duet::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

// Work units one loop iteration costs (it builds the loop object and a scope).
constexpr int64_t kIterationCost = 64;

class Evaluator {
 public:
  Evaluator(const Dict& globals, const Limits& limits) : globals_(globals), limits_(limits) {
    scopes_.emplace_back();
  }

  Result<std::string> run(const Body& body) {
    DUET_ASSIGN(const Flow flow, exec(body));
    (void)flow;  // break/continue outside a loop are rejected when they run
    return std::move(out_);
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  CallSite site(Pos pos) const { return {pos, limits_.max_value_size}; }

  // Every value computed and every loop iteration costs work; a template
  // that does too much stops with an error instead of running for minutes.
  Status charge(int64_t units, Pos pos) {
    work_ += units;
    if (work_ > limits_.max_work)
      return err("template does more than ", limits_.max_work, " units of work (at ", to_string(pos), ")");
    return {};
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    if (const Value* v = globals_.find(name)) return *v;
    return Value::undefined("'" + name + "' is undefined");
  }

  // ---- statements ----

  Result<Flow> exec(const Body& body) {
    for (const Stmt& s : body) {
      DUET_ASSIGN(const Flow flow, exec(s));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Result<Flow> exec(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        DUET_TRY(write(s.text, s.pos));
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        DUET_ASSIGN(const Value v, eval(*s.expr));
        DUET_TRY(write(v.str(), s.pos));
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          bool take = true;
          if (cond) {
            DUET_ASSIGN(const Value c, eval(*cond));
            take = c.truthy();
          }
          if (take) return exec(body);
        }
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        return exec_for(s);
      case Stmt::Kind::kSet:
        return exec_set(s);
      case Stmt::Kind::kBreak:
      case Stmt::Kind::kContinue:
        if (loop_depth_ == 0)
          return err("'", s.kind == Stmt::Kind::kBreak ? "break" : "continue", "' outside a loop at ",
                     to_string(s.pos));
        return s.kind == Stmt::Kind::kBreak ? Flow::kBreak : Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Status write(const std::string& text, Pos pos) {
    if (out_.size() + text.size() > limits_.max_output_bytes)
      return err("template output exceeds ", limits_.max_output_bytes, " bytes (at ", to_string(pos), ")");
    out_ += text;
    return {};
  }

  Status bind_targets(const Stmt& s, const Value& item, Scope& scope) {
    if (s.targets.size() == 1) {
      scope[s.targets[0]] = item;
      return {};
    }
    if (!item.is_list() || item.list().size() != s.targets.size())
      return err("cannot unpack a ", item.type_name(), " into ", s.targets.size(), " loop variables at ",
                 to_string(s.pos));
    for (size_t i = 0; i < s.targets.size(); ++i) scope[s.targets[i]] = item.list()[i];
    return {};
  }

  Result<Flow> exec_for(const Stmt& s) {
    DUET_ASSIGN(const Value seq, eval(*s.expr));
    List items;
    if (seq.is_list()) {
      items = seq.list();
    } else if (seq.is_dict()) {
      for (const auto& [k, _] : seq.dict().items) items.emplace_back(k);
    } else if (seq.is_string()) {
      const std::u32string t = decode_utf8(seq.as_string());
      if (t.size() * sizeof(Value) > limits_.max_value_size)
        return err("looping over a string of ", t.size(), " characters exceeds the size limit at ", to_string(s.pos));
      for (size_t i = 0; i < t.size(); ++i) items.emplace_back(encode_utf8(std::u32string_view(t).substr(i, 1)));
    } else if (!seq.is_undefined()) {
      return err("cannot loop over a ", seq.type_name(), " at ", to_string(s.pos));
    }
    if (s.cond) {  // `for x in xs if cond` filters before loop.index and loop.length count
      List kept;
      for (const Value& item : items) {
        DUET_TRY(charge(kIterationCost, s.pos));
        scopes_.emplace_back();
        Status st = bind_targets(s, item, scopes_.back());
        Result<Value> c = st ? eval(*s.cond) : Result<Value>(st.error());
        scopes_.pop_back();
        if (!c) return c.error();
        if (c->truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body);

    const int64_t n = static_cast<int64_t>(items.size());
    ++loop_depth_;
    for (int64_t i = 0; i < n; ++i) {
      if (Status st = charge(kIterationCost, s.pos); !st) {
        --loop_depth_;
        return st.error();
      }
      scopes_.emplace_back();
      if (s.uses_loop) {
        Dict loop;
        loop.items.reserve(9);
        loop.items.emplace_back("index", Value(i + 1));
        loop.items.emplace_back("index0", Value(i));
        loop.items.emplace_back("revindex", Value(n - i));
        loop.items.emplace_back("revindex0", Value(n - i - 1));
        loop.items.emplace_back("first", Value(i == 0));
        loop.items.emplace_back("last", Value(i == n - 1));
        loop.items.emplace_back("length", Value(n));
        loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("no previous item"));
        loop.items.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("no next item"));
        scopes_.back()["loop"] = Value(std::move(loop));
      }
      Status bound = bind_targets(s, items[static_cast<size_t>(i)], scopes_.back());
      Result<Flow> flow = bound ? exec(s.body) : Result<Flow>(bound.error());
      scopes_.pop_back();
      if (!flow) {
        --loop_depth_;
        return flow.error();
      }
      if (*flow == Flow::kBreak) break;
    }
    --loop_depth_;
    return Flow::kNormal;
  }

  Result<Flow> exec_set(const Stmt& s) {
    DUET_ASSIGN(Value v, eval(*s.expr));
    if (s.attr.empty()) {
      scopes_.back()[s.targets[0]] = std::move(v);
      return Flow::kNormal;
    }
    const Value target = lookup(s.targets[0]);
    if (!target.is_dict() || !target.dict().is_namespace)
      return err("'{% set ", s.targets[0], ".", s.attr, " %}' needs a namespace() object, not a ",
                 target.type_name(), " at ", to_string(s.pos));
    size_t walked = 0;
    const bool cycle = reaches(v, target, walked);
    DUET_TRY(charge(static_cast<int64_t>(walked), s.pos));
    if (cycle)
      return err("'{% set ", s.targets[0], ".", s.attr, " %}' would make the namespace hold itself at ",
                 to_string(s.pos));
    target.dict().set(s.attr, std::move(v));
    return Flow::kNormal;
  }

  // ---- expressions ----

  Result<Value> eval(const Expr& e) {
    DUET_ASSIGN(Value v, eval_inner(e));
    if (v.memory_hint() > limits_.max_value_size)
      return err("template value of ", v.memory_hint(), " bytes exceeds the limit of ", limits_.max_value_size,
                 " at ", to_string(e.pos));
    DUET_TRY(charge(static_cast<int64_t>(v.size_hint()), e.pos));
    return v;
  }

  Result<Args> eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t i = first; i < e.args.size(); ++i) {
      DUET_ASSIGN(Value v, eval(*e.args[i]));
      a.pos.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      DUET_ASSIGN(Value v, eval(*x));
      a.kw.emplace_back(k, std::move(v));
    }
    return a;
  }

  Result<Value> eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList: {
        List l;
        for (const auto& x : e.args) {
          DUET_ASSIGN(Value v, eval(*x));
          l.push_back(std::move(v));
        }
        return Value(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          DUET_ASSIGN(const Value k, eval(*e.args[i]));
          if (!k.is_string()) return err("dict keys must be strings, not ", k.type_name(), " at ", to_string(e.pos));
          DUET_ASSIGN(Value v, eval(*e.args[i + 1]));
          d.set(k.as_string(), std::move(v));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::kAttr: {
        DUET_ASSIGN(const Value obj, eval(*e.args[0]));
        return member(obj, Value(e.name), e.pos);
      }
      case Expr::Kind::kIndex: {
        DUET_ASSIGN(const Value obj, eval(*e.args[0]));
        DUET_ASSIGN(const Value key, eval(*e.args[1]));
        return member(obj, key, e.pos);
      }
      case Expr::Kind::kSlice: return eval_slice(e);
      case Expr::Kind::kCall: return eval_call(e);
      case Expr::Kind::kFilter: {
        DUET_ASSIGN(const Value in, eval(*e.args[0]));
        DUET_ASSIGN(const Args a, eval_args(e, 1));
        return call_filter(e.name, in, a, site(e.pos));
      }
      case Expr::Kind::kTest: {
        DUET_ASSIGN(const Value in, eval(*e.args[0]));
        DUET_ASSIGN(const Args a, eval_args(e, 1));
        DUET_ASSIGN(const bool r, call_test(e.name, in, a, site(e.pos)));
        return Value(r != e.negated);
      }
      case Expr::Kind::kUnary: {
        DUET_ASSIGN(const Value v, eval(*e.args[0]));
        if (e.name == "not") return Value(!v.truthy());
        if (!v.is_number()) return type_mismatch(e.name, v, v, e.pos);
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
        if (v.is_float()) return Value(-v.as_float());
        if (v.as_int() == INT64_MIN) return err("integer overflow at ", to_string(e.pos));
        return Value(-v.as_int());
      }
      case Expr::Kind::kBinary: return eval_binary(e);
      case Expr::Kind::kCond: {
        DUET_ASSIGN(const Value c, eval(*e.args[0]));
        if (c.truthy()) return eval(*e.args[1]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined("conditional expression without else");
      }
    }
    return err("unknown expression at ", to_string(e.pos));
  }

  // obj.name and obj[key]: a missing member is undefined, as in Jinja, but
  // looking into an undefined value is an error.
  Result<Value> member(const Value& obj, const Value& key, Pos pos) {
    if (obj.is_undefined()) return err(obj.undefined_what(), " (at ", to_string(pos), ")");
    if (obj.is_dict()) {
      if (key.is_string())
        if (const Value* v = obj.dict().find(key.as_string())) return *v;
      return Value::undefined("'dict object' has no attribute " + key.repr());
    }
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
      if (obj.is_list()) {
        const int64_t n = static_cast<int64_t>(obj.list().size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined("list index " + std::to_string(key.as_int()) + " out of range");
        return obj.list()[static_cast<size_t>(i)];
      }
      const std::u32string t = decode_utf8(obj.as_string());
      const int64_t n = static_cast<int64_t>(t.size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index " + std::to_string(key.as_int()) + " out of range");
      return Value(encode_utf8(std::u32string_view(t).substr(static_cast<size_t>(i), 1)));
    }
    return Value::undefined("'" + std::string(obj.type_name()) + "' has no attribute " + key.repr());
  }

  // Python slicing: obj[start:stop:step] on a list or string.
  Result<Value> eval_slice(const Expr& e) {
    DUET_ASSIGN(const Value obj, eval(*e.args[0]));
    int64_t bound[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.args[static_cast<size_t>(k) + 1]) continue;
      DUET_ASSIGN(const Value v, eval(*e.args[static_cast<size_t>(k) + 1]));
      if (v.is_none()) continue;
      if (!v.is_int() && !v.is_bool()) return err("slice bounds must be integers at ", to_string(e.pos));
      bound[k] = v.as_int();
      given[k] = true;
    }
    const int64_t step = bound[2];
    if (step == 0) return err("slice step cannot be zero at ", to_string(e.pos));
    std::u32string text;
    int64_t n = 0;
    if (obj.is_list()) {
      n = static_cast<int64_t>(obj.list().size());
    } else if (obj.is_string()) {
      text = decode_utf8(obj.as_string());
      n = static_cast<int64_t>(text.size());
    } else if (obj.is_undefined()) {
      return err(obj.undefined_what(), " (at ", to_string(e.pos), ")");
    } else {
      return err("cannot slice a ", obj.type_name(), " at ", to_string(e.pos));
    }
    const auto clamp = [&](int64_t v, bool is_given, int64_t fallback) {
      if (!is_given) return fallback;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    const int64_t start = clamp(bound[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(bound[1], given[1], step > 0 ? n : -1);
    List items;
    std::u32string chars;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.is_list()) {
        items.push_back(obj.list()[static_cast<size_t>(i)]);
      } else {
        chars += text[static_cast<size_t>(i)];
      }
    }
    if (obj.is_list()) return Value(std::move(items));
    return Value(encode_utf8(chars));
  }

  Result<Value> eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {
      DUET_ASSIGN(const Value obj, eval(*callee.args[0]));
      DUET_ASSIGN(const Args a, eval_args(e, 1));
      return call_method(obj, callee.name, a, site(e.pos));
    }
    if (callee.kind == Expr::Kind::kName) {
      DUET_ASSIGN(const Args a, eval_args(e, 1));
      return call_global(callee.name, a, site(e.pos));
    }
    return err("unsupported call at ", to_string(e.pos), ": only functions and methods by name can be called");
  }

  Error type_mismatch(const std::string& op, const Value& a, const Value& b, Pos pos) {
    if (a.is_undefined()) return err(a.undefined_what(), " (at ", to_string(pos), ")");
    if (b.is_undefined()) return err(b.undefined_what(), " (at ", to_string(pos), ")");
    return err("unsupported operand types for '", op, "': ", a.type_name(), " and ", b.type_name(), " at ",
               to_string(pos));
  }

  Result<Value> repeat(const Value& seq, const Value& times, Pos pos) {
    const int64_t n = std::max<int64_t>(0, times.as_int());
    const size_t unit = seq.memory_hint();
    if (unit != 0 && static_cast<uint64_t>(n) > limits_.max_value_size / unit)
      return err("repetition result exceeds the limit of ", limits_.max_value_size, " at ", to_string(pos));
    if (seq.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return Value(std::move(out));
    }
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
    return Value(std::move(out));
  }

  Result<Value> eval_binary(const Expr& e) {
    const std::string& op = e.name;
    DUET_ASSIGN(const Value a, eval(*e.args[0]));
    if (op == "and") return a.truthy() ? eval(*e.args[1]) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1]);
    DUET_ASSIGN(const Value b, eval(*e.args[1]));
    if (op == "==") return Value(equal(a, b));
    if (op == "!=") return Value(!equal(a, b));
    if (op == "~") {
      const size_t n = a.str().size() + b.str().size();
      if (n > limits_.max_value_size)
        return err("template value of ", n, " bytes exceeds the limit of ", limits_.max_value_size, " at ", to_string(e.pos));
      return Value(a.str() + b.str());
    }
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) return type_mismatch(op, a, b, e.pos);
        found = b.as_string().find(a.as_string()) != std::string::npos;
      } else if (b.is_list()) {
        for (const Value& v : b.list()) found = found || equal(v, a);
      } else if (b.is_dict()) {
        found = a.is_string() && b.dict().find(a.as_string()) != nullptr;
      } else if (!b.is_undefined()) {
        return type_mismatch(op, a, b, e.pos);
      }
      return Value(found == (op == "in"));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      const auto c = compare(a, b);
      if (!c) return type_mismatch(op, a, b, e.pos);
      if (op == "<") return Value(*c < 0);
      if (op == ">") return Value(*c > 0);
      if (op == "<=") return Value(*c <= 0);
      return Value(*c >= 0);
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        if (a.as_string().size() + b.as_string().size() > limits_.max_value_size)
          return err("template value exceeds the limit of ", limits_.max_value_size, " bytes at ", to_string(e.pos));
        return Value(a.as_string() + b.as_string());
      }
      if (a.is_list() && b.is_list()) {
        if ((a.list().size() + b.list().size()) * sizeof(Value) > limits_.max_value_size)
          return err("template list exceeds the limit of ", limits_.max_value_size, " bytes at ", to_string(e.pos));
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value(std::move(l));
      }
    }
    if (op == "*") {
      if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b, e.pos);
      if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a, e.pos);
    }
    if (!a.is_number() || !b.is_number()) return type_mismatch(op, a, b, e.pos);
    return arithmetic(op, a, b, e.pos);
  }

  Result<Value> arithmetic(const std::string& op, const Value& a, const Value& b, Pos pos) {
    const bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_float() == 0) return err("division by zero at ", to_string(pos));
      return Value(a.as_float() / b.as_float());
    }
    if (floats) {
      const double x = a.as_float(), y = b.as_float();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "**") return Value(std::pow(x, y));
      if (y == 0) return err("division by zero at ", to_string(pos));
      if (op == "//") return Value(std::floor(x / y));
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value(r);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    const Error overflow = err("integer overflow in '", op, "' at ", to_string(pos));
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return overflow;
      return Value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return overflow;
      return Value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return overflow;
      return Value(r);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      // Squaring: at most 63 steps whatever the exponent.
      int64_t base = x;
      r = 1;
      for (uint64_t k = static_cast<uint64_t>(y); k != 0; k >>= 1) {
        if ((k & 1) && __builtin_mul_overflow(r, base, &r)) return overflow;
        if ((k >> 1) != 0 && __builtin_mul_overflow(base, base, &base)) return overflow;
      }
      return Value(r);
    }
    if (y == 0) return err("division by zero at ", to_string(pos));
    if (x == INT64_MIN && y == -1) return overflow;
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors
      q -= 1;
      m += y;
    }
    return Value(op == "//" ? q : m);
  }

  const Dict& globals_;
  const Limits& limits_;
  std::vector<Scope> scopes_;
  std::string out_;
  int64_t work_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Result<std::string> evaluate(const Body& body, const Dict& globals, const Limits& limits) {
  return Evaluator(globals, limits).run(body);
}

}  // namespace duet::jinja
