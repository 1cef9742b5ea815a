#include "tokenizer/jinja/strings.h"

#include "core/utf8.h"

namespace duet::jinja {

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
  for (const char32_t c : s) utf8::append(c, out);
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

}  // namespace

std::string to_upper(const std::string& s) { return map_chars(s, upper); }
std::string to_lower(const std::string& s) { return map_chars(s, lower); }

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

Result<std::string> replace_all(const std::string& s, const std::string& from, const std::string& to,
                                int64_t count, const CallSite& site) {
  std::string out;
  size_t i = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::u32string t = decode_utf8(s);
    DUET_TRY(site.check_size(s.size() + (t.size() + 1) * to.size()));
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
    DUET_TRY(site.check_size(out.size()));
    i = j + from.size();
    ++done;
  }
  out.append(s, i, std::string::npos);
  DUET_TRY(site.check_size(out.size()));
  return out;
}

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
      DUET_TRY(site.check_size(parts.size() * sizeof(Value)));
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
    DUET_TRY(site.check_size(parts.size() * sizeof(Value)));
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
    DUET_TRY(site.check_size(out.size()));
    if (last) break;
    out += '\n';
    i = j + 1;
    first_line = false;
  }
  return Value(std::move(out));
}

Result<Value> call_string_method(const Value& obj, const std::string& name, const Args& args,
                               const CallSite& site) {
  const std::string& s = obj.as_string();
  if (name == "strip") return Value(strip(s, args.get(0, "chars"), true, true));
  if (name == "lstrip") return Value(strip(s, args.get(0, "chars"), true, false));
  if (name == "rstrip") return Value(strip(s, args.get(0, "chars"), false, true));
  if (name == "upper") return Value(to_upper(s));
  if (name == "lower") return Value(to_lower(s));
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

}  // namespace duet::jinja
