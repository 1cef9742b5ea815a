#include "tokenizer/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tokenizer/utf8.h"

namespace duet::jinja {

const Value* Args::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const utf8::Prefix p = utf8::classify(s.substr(i));
    if (p.kind != utf8::Prefix::kValid) {
      out += U'\uFFFD';
      ++i;
      continue;
    }
    const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
    uint32_t cp = 0;
    switch (p.len) {
      case 1: cp = b(0); break;
      case 2: cp = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F); break;
      case 3: cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F); break;
      default: cp = ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    }
    out += static_cast<char32_t>(cp);
    i += p.len;
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) {
    const uint32_t cp = c;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

namespace {

// Python's str.isspace(), which strip() and split() use.
bool is_ws(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Case mapping is ASCII-only: chat templates apply it to role names.
char32_t upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool is_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const char32_t u = static_cast<unsigned char>(c);
    c = static_cast<char>(prev_cased ? lower(u) : upper(u));
    prev_cased = is_alpha(u);
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = map_chars(s, lower);
  if (!out.empty()) out[0] = static_cast<char>(upper(static_cast<unsigned char>(out[0])));
  return out;
}

// str.strip / lstrip / rstrip: `chars` (code points) or whitespace.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string t = decode_utf8(s);
  std::u32string set;
  const bool ws = !chars || chars->is_none();
  if (!ws) set = decode_utf8(chars->str());
  const auto drop = [&](char32_t c) { return ws ? is_ws(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = t.size();
  if (left)
    while (b < e && drop(t[b])) ++b;
  if (right)
    while (e > b && drop(t[e - 1])) --e;
  return encode_utf8(std::u32string_view(t).substr(b, e - b));
}

Error type_error(const char* what, const Value& v, const CallSite& site) {
  if (v.is_undefined()) return err(v.undefined_what(), " (", what, " at ", to_string(site.pos), ")");
  return err(what, " cannot take a ", v.type_name(), " at ", to_string(site.pos));
}

Status check_size(size_t n, const CallSite& site) {
  if (n > site.max_size)
    return err("template value of ", n, " bytes exceeds the limit of ", site.max_size, " at ",
               to_string(site.pos));
  return {};
}

Result<std::string> replace_all(const std::string& s, const std::string& from, const std::string& to,
                                int64_t count, const CallSite& site) {
  std::string out;
  size_t i = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::u32string t = decode_utf8(s);
    DUET_TRY(check_size(s.size() + (t.size() + 1) * to.size(), site));
    for (size_t k = 0; k <= t.size(); ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (k < t.size()) out += encode_utf8(std::u32string_view(t).substr(k, 1));
    }
    return out;
  }
  while (count < 0 || done < count) {
    const size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i);
    out += to;
    DUET_TRY(check_size(out.size(), site));
    i = j + from.size();
    ++done;
  }
  out.append(s, i, std::string::npos);
  DUET_TRY(check_size(out.size(), site));
  return out;
}

// str.split(sep=None, maxsplit=-1).
Result<Value> split(const std::string& s, const Value* sep, const Value* maxsplit, const CallSite& site) {
  const int64_t limit = maxsplit && maxsplit->is_number() ? maxsplit->as_int() : -1;
  List parts;
  if (!sep || sep->is_none()) {
    const std::u32string t = decode_utf8(s);
    const auto piece = [&](size_t b, size_t e) { return Value(encode_utf8(std::u32string_view(t).substr(b, e - b))); };
    size_t i = 0;
    while (true) {
      while (i < t.size() && is_ws(t[i])) ++i;
      if (i >= t.size()) break;
      if (limit >= 0 && static_cast<int64_t>(parts.size()) >= limit) {
        size_t e = t.size();
        while (e > i && is_ws(t[e - 1])) --e;
        parts.push_back(piece(i, e));
        break;
      }
      size_t j = i;
      while (j < t.size() && !is_ws(t[j])) ++j;
      parts.push_back(piece(i, j));
      DUET_TRY(check_size(parts.size() * sizeof(Value), site));
      i = j;
    }
    return Value(std::move(parts));
  }
  if (!sep->is_string()) return type_error("split()", *sep, site);
  const std::string& d = sep->as_string();
  if (d.empty()) return err("split() with an empty separator at ", to_string(site.pos));
  size_t i = 0;
  while (limit < 0 || static_cast<int64_t>(parts.size()) < limit) {
    const size_t j = s.find(d, i);
    if (j == std::string::npos) break;
    parts.emplace_back(s.substr(i, j - i));
    DUET_TRY(check_size(parts.size() * sizeof(Value), site));
    i = j + d.size();
  }
  parts.emplace_back(s.substr(i));
  return Value(std::move(parts));
}

Result<bool> starts_or_ends(const std::string& s, const Value* arg, bool start, const CallSite& site) {
  if (!arg) return err(start ? "startswith" : "endswith", "() needs an argument at ", to_string(site.pos));
  const auto one = [&](const Value& v) -> Result<bool> {
    if (!v.is_string()) return type_error(start ? "startswith()" : "endswith()", v, site);
    return start ? s.starts_with(v.as_string()) : s.ends_with(v.as_string());
  };
  if (!arg->is_list()) return one(*arg);
  for (const Value& v : arg->list()) {
    DUET_ASSIGN(const bool hit, one(v));
    if (hit) return true;
  }
  return false;
}

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
    DUET_TRY(check_size(t.size() * sizeof(Value), site));
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

Result<Value> indent(const std::string& s, const Args& args, const CallSite& site) {
  const Value* width = args.get(0, "width");
  const Value* first = args.get(1, "first");
  const Value* blank = args.get(2, "blank");
  std::string pad;
  if (!width) {
    pad = "    ";
  } else if (width->is_string()) {
    pad = width->as_string();
  } else if (width->is_int() && width->as_int() >= 0 && width->as_int() <= 1024) {
    pad.assign(static_cast<size_t>(width->as_int()), ' ');
  } else {
    return err("indent width must be a string or 0..1024 at ", to_string(site.pos));
  }
  std::string out;
  size_t i = 0;
  bool first_line = true;
  while (i <= s.size()) {
    size_t j = s.find('\n', i);
    const bool last = j == std::string::npos;
    if (last) j = s.size();
    const std::string line = s.substr(i, j - i);
    const bool add = first_line ? (first && first->truthy()) : (!line.empty() || (blank && blank->truthy()));
    if (add) out += pad;
    out += line;
    DUET_TRY(check_size(out.size(), site));
    if (last) break;
    out += '\n';
    i = j + 1;
    first_line = false;
  }
  return Value(std::move(out));
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
  if (name == "upper") return Value(map_chars(in.str(), upper));
  if (name == "lower") return Value(map_chars(in.str(), lower));
  if (name == "capitalize") return Value(capitalize(in.str()));
  if (name == "title") return Value(title(in.str()));
  if (name == "string") return Value(in.str());
  if (name == "safe") return in;
  if (name == "tojson") {
    const Value* ind = args.get(0, "indent");
    if (ind && !ind->is_none() && (!ind->is_int() || ind->as_int() < 0 || ind->as_int() > 64))
      return err("tojson indent must be 0..64 at ", to_string(site.pos));
    std::string json = to_json(in, ind && ind->is_int() ? static_cast<int>(ind->as_int()) : -1);
    DUET_TRY(check_size(json.size(), site));
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
      DUET_TRY(check_size(out.size(), site));
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
  if (name == "lower") return in.is_string() && map_chars(in.as_string(), lower) == in.as_string();
  if (name == "upper") return in.is_string() && map_chars(in.as_string(), upper) == in.as_string();
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
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (name == "strip") return Value(strip(s, args.get(0, "chars"), true, true));
    if (name == "lstrip") return Value(strip(s, args.get(0, "chars"), true, false));
    if (name == "rstrip") return Value(strip(s, args.get(0, "chars"), false, true));
    if (name == "upper") return Value(map_chars(s, upper));
    if (name == "lower") return Value(map_chars(s, lower));
    if (name == "title") return Value(title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "startswith" || name == "endswith") {
      DUET_ASSIGN(const bool r, starts_or_ends(s, args.get(0, "prefix"), name == "startswith", site));
      return Value(r);
    }
    if (name == "split") return split(s, args.get(0, "sep"), args.get(1, "maxsplit"), site);
    if (name == "replace") {
      const Value* from = args.get(0, "old");
      const Value* to = args.get(1, "new");
      const Value* count = args.get(2, "count");
      if (!from || !to || !from->is_string() || !to->is_string())
        return err("replace() needs two strings at ", to_string(site.pos));
      DUET_ASSIGN(std::string out, replace_all(s, from->as_string(), to->as_string(),
                                               count && count->is_number() ? count->as_int() : -1, site));
      return Value(std::move(out));
    }
    if (name == "find") {
      const Value* sub = args.get(0, "sub");
      if (!sub || !sub->is_string()) return err("find() needs a string at ", to_string(site.pos));
      const size_t at = s.find(sub->as_string());
      if (at == std::string::npos) return Value(-1);
      return Value(static_cast<int64_t>(decode_utf8(std::string_view(s).substr(0, at)).size()));
    }
    if (name == "join") {
      const Value* items = args.get(0, "iterable");
      if (!items) return err("join() needs a list at ", to_string(site.pos));
      Args a;
      a.pos.push_back(obj);
      return call_filter("join", *items, a, site);
    }
    return err("unsupported string method '", name, "' at ", to_string(site.pos));
  }
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
