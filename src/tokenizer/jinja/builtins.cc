#include "tokenizer/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja/strings.h"

namespace duet::jinja {

const Value* Args::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Status CallSite::check_size(size_t n) const {
  if (n > max_size)
    return err("template value of ", n, " bytes exceeds the limit of ", max_size, " at ", to_string(pos));
  return {};
}

Error type_error(const char* what, const Value& v, const CallSite& site) {
  if (v.is_undefined()) return err(v.undefined_what(), " (", what, " at ", to_string(site.pos), ")");
  return err(what, " cannot take a ", v.type_name(), " at ", to_string(site.pos));
}

namespace {

// The elements a filter walks: a list's items, a dict's keys, a string's characters.
Result<List> items_of(const Value& v, const char* what, const CallSite& site) {
  if (v.is_list()) return v.list();
  if (v.is_undefined()) return List{};
  if (v.is_dict()) {
    List keys;
    for (const auto& [k, _] : v.dict().items) keys.emplace_back(k);
    return keys;
  }
  if (v.is_string()) {
    List chars;
    const std::u32string t = decode_utf8(v.as_string());
    DUET_TRY(site.check_size(t.size() * sizeof(Value)));
    for (size_t i = 0; i < t.size(); ++i) chars.emplace_back(encode_utf8(std::u32string_view(t).substr(i, 1)));
    return chars;
  }
  return type_error(what, v, site);
}

// x.attribute or x['attribute'], with dots for nested attributes ("a.b").
Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t i = 0;
  while (true) {
    const size_t dot = path.find('.', i);
    const std::string key = path.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
    if (!cur.is_dict()) return Value::undefined("no attribute '" + key + "'");
    const Value* next = cur.dict().find(key);
    if (!next) return Value::undefined("no attribute '" + key + "'");
    cur = *next;
    if (dot == std::string::npos) return cur;
    i = dot + 1;
  }
}

Result<Value> length_of(const Value& v, const CallSite& site) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value(0);
    case Value::Kind::kString: return Value(static_cast<int64_t>(decode_utf8(v.as_string()).size()));
    case Value::Kind::kList: return Value(static_cast<int64_t>(v.list().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(v.dict().items.size()));
    default: return type_error("length", v, site);
  }
}

Result<Value> sort(const Value& in, const Args& args, const CallSite& site) {
  DUET_ASSIGN(List items, items_of(in, "sort", site));
  const Value* reverse = args.get(0, "reverse");
  const Value* attribute = args.get(2, "attribute");
  const auto key = [&](const Value& v) { return attribute ? attribute_of(v, attribute->str()) : v; };
  bool comparable = true;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const auto c = compare(key(a), key(b));
    if (!c) comparable = false;
    return c && *c < 0;
  });
  if (!comparable) return err("sort: values cannot be ordered at ", to_string(site.pos));
  if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

// select / reject (test on the item) and selectattr / rejectattr (on an attribute).
Result<Value> select(const Value& in, const Args& args, bool keep, bool by_attr, const CallSite& site) {
  DUET_ASSIGN(const List items, items_of(in, "select", site));
  size_t first_test_arg = 0;
  std::string attr;
  if (by_attr) {
    if (args.pos.empty() || !args.pos[0].is_string())
      return err("selectattr/rejectattr need an attribute name at ", to_string(site.pos));
    attr = args.pos[0].as_string();
    first_test_arg = 1;
  }
  std::string test;
  Args test_args;
  if (args.pos.size() > first_test_arg) {
    if (!args.pos[first_test_arg].is_string()) return err("test name must be a string at ", to_string(site.pos));
    test = args.pos[first_test_arg].as_string();
    test_args.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(first_test_arg) + 1, args.pos.end());
  }
  List out;
  for (const Value& item : items) {
    const Value subject = by_attr ? attribute_of(item, attr) : item;
    bool pass = subject.truthy();
    if (!test.empty()) {
      DUET_ASSIGN(pass, call_test(test, subject, test_args, site));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Result<Value> map(const Value& in, const Args& args, const CallSite& site) {
  DUET_ASSIGN(const List items, items_of(in, "map", site));
  List out;
  if (const Value* attribute = args.get(99, "attribute")) {
    const Value* fallback = args.get(99, "default");
    for (const Value& item : items) {
      Value v = attribute_of(item, attribute->str());
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value(std::move(out));
  }
  if (args.pos.empty() || !args.pos[0].is_string()) return err("map needs a filter name or attribute= at ", to_string(site.pos));
  Args rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  for (const Value& item : items) {
    DUET_ASSIGN(Value v, call_filter(args.pos[0].as_string(), item, rest, site));
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

}  // namespace

Result<Value> call_filter(const std::string& name, const Value& in, const Args& args, const CallSite& site) {
  if (name == "default" || name == "d") {
    const Value* fallback = args.get(0, "default_value");
    const Value* boolean = args.get(1, "boolean");
    const bool use = (boolean && boolean->truthy()) ? !in.truthy() : in.is_undefined();
    return use ? (fallback ? *fallback : Value("")) : in;
  }
  if (name == "length" || name == "count") return length_of(in, site);
  if (name == "trim") return Value(strip(in.str(), args.get(0, "chars"), true, true));
  if (name == "upper") return Value(to_upper(in.str()));
  if (name == "lower") return Value(to_lower(in.str()));
  if (name == "capitalize") return Value(capitalize(in.str()));
  if (name == "title") return Value(title(in.str()));
  if (name == "string") return Value(in.str());
  if (name == "safe") return in;
  if (name == "tojson") {
    const Value* ind = args.get(0, "indent");
    if (ind && !ind->is_none() && (!ind->is_int() || ind->as_int() < 0 || ind->as_int() > 64))
      return err("tojson indent must be 0..64 at ", to_string(site.pos));
    std::string json = to_json(in, ind && ind->is_int() ? static_cast<int>(ind->as_int()) : -1);
    DUET_TRY(site.check_size(json.size()));
    return Value(std::move(json));
  }
  if (name == "first" || name == "last") {
    if (in.is_undefined()) return type_error(name.c_str(), in, site);
    DUET_ASSIGN(const List items, items_of(in, name.c_str(), site));
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    DUET_ASSIGN(const List items, items_of(in, "join", site));
    const Value* sep = args.get(0, "d");
    const Value* attribute = args.get(1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i && sep) out += sep->str();
      out += attribute ? attribute_of(items[i], attribute->str()).str() : items[i].str();
      DUET_TRY(site.check_size(out.size()));
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    const Value* from = args.get(0, "old");
    const Value* to = args.get(1, "new");
    const Value* count = args.get(2, "count");
    if (!from || !to) return err("replace needs old and new at ", to_string(site.pos));
    DUET_ASSIGN(std::string out, replace_all(in.str(), from->str(), to->str(),
                                             count && count->is_number() ? count->as_int() : -1, site));
    return Value(std::move(out));
  }
  if (name == "int") {
    if (in.is_number()) return Value(in.is_float() ? static_cast<int64_t>(std::trunc(std::clamp(in.as_float(), -9e18, 9e18))) : in.as_int());
    const Value* fallback = args.get(0, "default");
    if (in.is_string()) {
      char* end = nullptr;
      const std::string s = strip(in.as_string(), nullptr, true, true);
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(v));
    }
    return fallback ? *fallback : Value(0);
  }
  if (name == "float") {
    if (in.is_number()) return Value(in.as_float());
    if (in.is_string()) {
      char* end = nullptr;
      const std::string s = strip(in.as_string(), nullptr, true, true);
      const double v = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return Value(v);
    }
    const Value* fallback = args.get(0, "default");
    return fallback ? *fallback : Value(0.0);
  }
  if (name == "abs") {
    if (in.is_float()) return Value(std::fabs(in.as_float()));
    if (in.is_number() && in.as_int() != INT64_MIN) return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
    return type_error("abs", in, site);
  }
  if (name == "list") {
    DUET_ASSIGN(List items, items_of(in, "list", site));
    return Value(std::move(items));
  }
  if (name == "reverse") {
    if (in.is_string()) {
      std::u32string t = decode_utf8(in.as_string());
      std::reverse(t.begin(), t.end());
      return Value(encode_utf8(t));
    }
    DUET_ASSIGN(List items, items_of(in, "reverse", site));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "items" || name == "dictsort") {
    if (!in.is_dict()) return type_error(name.c_str(), in, site);
    List out;
    for (const auto& [k, v] : in.dict().items) out.emplace_back(List{Value(k), v});
    if (name == "dictsort")
      std::stable_sort(out.begin(), out.end(), [](const Value& a, const Value& b) {
        return a.list()[0].as_string() < b.list()[0].as_string();
      });
    return Value(std::move(out));
  }
  if (name == "sort") return sort(in, args, site);
  if (name == "unique") {
    DUET_ASSIGN(const List items, items_of(in, "unique", site));
    List out;
    for (const Value& v : items)
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, v); })) out.push_back(v);
    return Value(std::move(out));
  }
  if (name == "min" || name == "max") {
    DUET_ASSIGN(const List items, items_of(in, name.c_str(), site));
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    Value best = items[0];
    for (const Value& v : items) {
      const auto c = compare(v, best);
      if (!c) return err(name, ": values cannot be ordered at ", to_string(site.pos));
      if (name == "min" ? *c < 0 : *c > 0) best = v;
    }
    return best;
  }
  if (name == "select") return select(in, args, true, false, site);
  if (name == "reject") return select(in, args, false, false, site);
  if (name == "selectattr") return select(in, args, true, true, site);
  if (name == "rejectattr") return select(in, args, false, true, site);
  if (name == "map") return map(in, args, site);
  if (name == "indent") return indent(in.str(), args, site);
  return err("unsupported filter '", name, "' at ", to_string(site.pos));
}

Result<bool> call_test(const std::string& name, const Value& in, const Args& args, const CallSite& site) {
  const Value* arg = args.get(0, "value");
  const auto need_arg = [&]() -> Status {
    if (!arg) return err("test '", name, "' needs an argument at ", to_string(site.pos));
    return {};
  };
  if (name == "defined") return !in.is_undefined();
  if (name == "undefined") return in.is_undefined();
  if (name == "none") return in.is_none();
  if (name == "boolean") return in.is_bool();
  if (name == "true") return in.is_bool() && in.as_bool();
  if (name == "false") return in.is_bool() && !in.as_bool();
  if (name == "integer") return in.is_int();
  if (name == "float") return in.is_float();
  if (name == "number") return in.is_number();
  if (name == "string") return in.is_string();
  if (name == "mapping") return in.is_dict();
  if (name == "iterable") return in.is_list() || in.is_dict() || in.is_string();
  if (name == "sequence") return in.is_list() || in.is_dict() || in.is_string();
  if (name == "callable") return false;
  if (name == "lower") return in.is_string() && to_lower(in.as_string()) == in.as_string();
  if (name == "upper") return in.is_string() && to_upper(in.as_string()) == in.as_string();
  if (name == "odd" || name == "even") {
    if (!in.is_int() && !in.is_bool()) return type_error(name.c_str(), in, site);
    return (in.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    DUET_TRY(need_arg());
    if (!in.is_number() || !arg->is_number() || arg->as_int() == 0 || in.is_float() || arg->is_float())
      return err("divisibleby needs nonzero integers at ", to_string(site.pos));
    if (arg->as_int() == -1) return true;
    return in.as_int() % arg->as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") {
    DUET_TRY(need_arg());
    return equal(in, *arg);
  }
  if (name == "ne" || name == "!=") {
    DUET_TRY(need_arg());
    return !equal(in, *arg);
  }
  if (name == "lt" || name == "gt" || name == "le" || name == "ge" || name == "lessthan" || name == "greaterthan") {
    DUET_TRY(need_arg());
    const auto c = compare(in, *arg);
    if (!c) return err("test '", name, "': values cannot be ordered at ", to_string(site.pos));
    if (name == "lt" || name == "lessthan") return *c < 0;
    if (name == "gt" || name == "greaterthan") return *c > 0;
    if (name == "le") return *c <= 0;
    return *c >= 0;
  }
  if (name == "in") {
    DUET_TRY(need_arg());
    if (arg->is_string() && in.is_string()) return arg->as_string().find(in.as_string()) != std::string::npos;
    if (arg->is_dict()) return in.is_string() && arg->dict().find(in.as_string()) != nullptr;
    if (arg->is_list())
      return std::any_of(arg->list().begin(), arg->list().end(), [&](const Value& v) { return equal(v, in); });
    return type_error("test 'in'", *arg, site);
  }
  return err("unsupported test '", name, "' at ", to_string(site.pos));
}

Result<Value> call_method(const Value& obj, const std::string& name, const Args& args, const CallSite& site) {
  if (obj.is_string()) return call_string_method(obj, name, args, site);
  if (obj.is_dict()) {
    if (name == "items") return call_filter("items", obj, args, site);
    if (name == "keys" || name == "values") {
      List out;
      for (const auto& [k, v] : obj.dict().items) out.push_back(name == "keys" ? Value(k) : v);
      return Value(std::move(out));
    }
    if (name == "get") {
      const Value* key = args.get(0, "key");
      if (!key) return err("get() needs a key at ", to_string(site.pos));
      const Value* v = key->is_string() ? obj.dict().find(key->as_string()) : nullptr;
      if (v) return *v;
      const Value* fallback = args.get(1, "default");
      return fallback ? *fallback : Value::none();
    }
    return err("unsupported dict method '", name, "' at ", to_string(site.pos));
  }
  if (obj.is_undefined()) return err(obj.undefined_what(), " (calling ", name, "() at ", to_string(site.pos), ")");
  return err("unsupported method '", name, "' on a ", obj.type_name(), " at ", to_string(site.pos));
}

Result<Value> call_global(const std::string& name, const Args& args, const CallSite& site) {
  if (name == "raise_exception") {
    const Value* msg = args.get(0, "message");
    return err("template error: ", msg ? msg->str() : std::string("raise_exception() called"));
  }
  if (name == "namespace") {
    Dict d;
    d.is_namespace = true;
    if (!args.pos.empty()) {
      if (args.pos.size() > 1 || !args.pos[0].is_dict())
        return err("namespace() takes keyword arguments or one dict at ", to_string(site.pos));
      d.items = args.pos[0].dict().items;
    }
    for (const auto& [k, v] : args.kw) d.set(k, v);
    return Value(std::move(d));
  }
  if (name == "range") {
    int64_t start = 0, stop = 0, step = 1;
    for (const Value& v : args.pos)
      if (!v.is_int() && !v.is_bool()) return err("range() needs integers at ", to_string(site.pos));
    if (args.pos.size() == 1) {
      stop = args.pos[0].as_int();
    } else if (args.pos.size() == 2 || args.pos.size() == 3) {
      start = args.pos[0].as_int();
      stop = args.pos[1].as_int();
      if (args.pos.size() == 3) step = args.pos[2].as_int();
    } else {
      return err("range() takes 1 to 3 arguments at ", to_string(site.pos));
    }
    if (step == 0) return err("range() step must not be zero at ", to_string(site.pos));
    // Count without overflow: work in long double, then check against the limit.
    const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
    const long double n = span / static_cast<long double>(step);
    const long double count = n <= 0 ? 0 : std::ceil(n);
    if (count * sizeof(Value) > static_cast<long double>(site.max_size))
      return err("range() of ", static_cast<double>(count), " items exceeds the limit of ", site.max_size, " bytes at ",
                 to_string(site.pos));
    List out;
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) out.emplace_back(start + i * step);
    return Value(std::move(out));
  }
  return err("unsupported function '", name, "' at ", to_string(site.pos));
}

}  // namespace duet::jinja
