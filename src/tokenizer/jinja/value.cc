#include "tokenizer/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "core/keyed_list.h"

namespace duet::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) { set_keyed(items, key, std::move(v)); }

Value Value::undefined(std::string what) {
  Value v;
  v.s_ = std::move(what);
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
  }
  return false;
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e-05"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  }
  return sign + out;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool single = s.find('\'') == std::string::npos || s.find('"') != std::string::npos;
  const char q = single ? '\'' : '"';
  std::string out(1, q);
  for (const char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  out += q;
  return out;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Values can nest without bound (a namespace may even hold itself), so the
// recursive printers stop at this depth and print "...".
constexpr int kMaxPrintDepth = 64;
// Lists and dicts are shared, so a value can hold the same list many times
// over: `{% set l = [l, l] %}` twenty times is a few hundred bytes that a
// walk visits as a million items. Every printer and comparison counts the
// items it has visited and stops at this many (printing "...", or
// answering "not equal" / "not comparable") instead of running for hours.
constexpr size_t kMaxWalkItems = size_t{1} << 18;

void repr_into(const Value& v, int depth, size_t& walked, std::string& out);

void json_into(const Value& v, int indent, int level, std::string& out, size_t& walked) {
  if (level > kMaxPrintDepth || ++walked > kMaxWalkItems) {
    out += "...";
    return;
  }
  const auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : format_float(f);
      return;
    }
    case Value::Kind::kString: json_string(v.as_string(), out); return;
    case Value::Kind::kList: {
      const List& l = v.list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(level + 1);
        json_into(l[i], indent, level + 1, out, walked);
      }
      if (indent >= 0) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      const Dict& d = v.dict();
      if (d.items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(level + 1);
        json_string(d.items[i].first, out);
        out += ": ";
        json_into(d.items[i].second, indent, level + 1, out, walked);
      }
      if (indent >= 0) newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  size_t walked = 0;
  std::string out;
  repr_into(*this, 0, walked, out);
  return out;
}

namespace {

// Appends to `out` rather than returning strings, so a deep value costs the
// length of its text, not that times its depth.
void repr_into(const Value& v, int depth, size_t& walked, std::string& out) {
  if (depth > kMaxPrintDepth || ++walked > kMaxWalkItems) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Value::Kind::kUndefined: return;
    case Value::Kind::kNone: out += "None"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: out += format_float(v.as_float()); return;
    case Value::Kind::kString: out += repr_string(v.as_string()); return;
    case Value::Kind::kList: {
      out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += ", ";
        repr_into(v.list()[i], depth + 1, walked, out);
      }
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      const Dict& d = v.dict();
      out += d.is_namespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        out += repr_string(d.items[i].first) + ": ";
        repr_into(d.items[i].second, depth + 1, walked, out);
      }
      out += d.is_namespace ? "}>" : "}";
      return;
    }
  }
}

bool equal_at(const Value& a, const Value& b, int depth, size_t& walked);
std::optional<int> compare_at(const Value& a, const Value& b, int depth, size_t& walked);

}  // namespace

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return dict_->is_namespace ? "namespace" : "dict";
  }
  return "?";
}

size_t Value::size_hint() const {
  switch (kind_) {
    case Kind::kString: return s_.size();
    case Kind::kList: return list_->size();
    case Kind::kDict: return dict_->items.size();
    default: return 1;
  }
}

bool equal(const Value& a, const Value& b) {
  size_t walked = 0;
  return equal_at(a, b, 0, walked);
}

namespace {

bool equal_at(const Value& a, const Value& b, int depth, size_t& walked) {
  if (depth > kMaxPrintDepth || ++walked > kMaxWalkItems) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List &x = a.list(), &y = b.list();
      if (&x == &y) return true;  // the same list
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal_at(x[i], y[i], depth + 1, walked)) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (&x == &y) return true;  // the same dict
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equal_at(v, *w, depth + 1, walked)) return false;
      }
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::optional<int> compare(const Value& a, const Value& b) {
  size_t walked = 0;
  return compare_at(a, b, 0, walked);
}

bool reaches(const Value& from, const Value& target, size_t& visited) {
  if (!target.is_dict()) return false;
  // Iterative, with a visited set: the walk must not recurse with the depth
  // of what a template built, nor revisit shared parts.
  std::vector<const Value*> stack = {&from};
  std::unordered_set<const void*> seen;
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v->is_dict()) {
      if (&v->dict() == &target.dict()) return true;
      if (!seen.insert(&v->dict()).second) continue;
      ++visited;
      for (const auto& [_, item] : v->dict().items) stack.push_back(&item);
    } else if (v->is_list()) {
      if (!seen.insert(&v->list()).second) continue;
      ++visited;
      for (const Value& item : v->list()) stack.push_back(&item);
    }
  }
  return false;
}

namespace {

std::optional<int> compare_at(const Value& a, const Value& b, int depth, size_t& walked) {
  if (depth > kMaxPrintDepth || ++walked > kMaxWalkItems) return std::nullopt;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      if (x != x || y != y) return std::nullopt;
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code-point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const List &x = a.list(), &y = b.list();
    if (&x == &y) return 0;  // the same list
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal_at(x[i], y[i], depth + 1, walked)) continue;
      if (walked > kMaxWalkItems) return std::nullopt;
      return compare_at(x[i], y[i], depth + 1, walked);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return std::nullopt;
}

}  // namespace

std::string to_json(const Value& v, int indent) {
  std::string out;
  size_t walked = 0;
  json_into(v, indent, 0, out, walked);
  return out;
}

}  // namespace duet::jinja
