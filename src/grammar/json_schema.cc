#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "core/json_parse.h"
#include "grammar/gbnf_text.h"
#include "grammar/number_ranges.h"
#include "grammar/regex_to_gbnf.h"

namespace duet {

namespace {

// ordered_json keeps the schema's property order, which the grammar follows.
using Json = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {"title",   "description", "default",   "examples",  "$schema",
                                            "$id",     "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$anchor"};
const std::set<std::string> kKeywords = {
    "type",      "properties",       "required",         "additionalProperties", "items",   "prefixItems",
    "additionalItems", "minItems",   "maxItems",         "minLength",            "maxLength", "pattern",
    "format",    "minimum",          "maximum",          "exclusiveMinimum",     "exclusiveMaximum",
    "enum",      "const",            "anyOf",            "oneOf",                "allOf",   "$ref",
    "$defs",     "definitions"};
const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties"};

// The primitives every schema grammar may use, written out on first use.
const std::map<std::string, std::string> kPrimitives = {
    {"ws", "(\" \" | \"\\n\" [ \\t]{0," + std::to_string(kMaxJsonIndent) + "})?"},
    {"json-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"},
    {"json-string", "\"\\\"\" json-char* \"\\\"\""},
    {"json-integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})"},
    // Two exponent digits keep every numeral within a double's range: with
    // three, 7E363 parses as infinity, which no JSON consumer takes as a number.
    {"json-number", "json-integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?"},
    {"json-boolean", "\"true\" | \"false\""},
    {"json-null", "\"null\""},
    {"json-value", "json-object | json-array | json-string | json-number | json-boolean | json-null"},
    {"json-object",
     "\"{\" ws (json-string ws \":\" ws json-value (ws \",\" ws json-string ws \":\" ws json-value)*)? ws \"}\""},
    {"json-array", "\"[\" ws (json-value (ws \",\" ws json-value)*)? ws \"]\""},
    {"date",
     "[0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
     "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | "
     "\"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])) | leap-year \"-02-29\""},
    {"leap-year",
     "[0-9]{2} (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] [048] | [13579] [26]) \"00\""},
    {"time",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? "
     "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
    {"date-time", "date \"T\" time"},
    {"uuid",
     "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"},
};
// What a primitive uses, so the used set is closed.
const std::map<std::string, std::vector<std::string>> kPrimitiveUses = {
    {"json-string", {"json-char"}},
    {"json-number", {"json-integer"}},
    {"json-value", {"json-object", "json-array", "json-string", "json-number", "json-boolean", "json-null"}},
    {"json-object", {"ws", "json-string", "json-value"}},
    {"json-array", {"ws", "json-value"}},
    {"date", {"leap-year"}},
    {"date-time", {"date", "time"}},
};
const std::set<std::string> kFormats = {"date", "time", "date-time", "uuid"};

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaLimits& limits) : root_(root), limits_(limits) {}

  Result<std::string> compile() {
    DUET_ASSIGN(std::string body, visit(root_, "#", "root", 0));
    std::string text = "root ::= " + body + "\n";
    for (const auto& [name, rule] : rules_) text += name + " ::= " + rule + "\n";
    for (const std::string& p : primitives_) text += p + " ::= " + kPrimitives.at(p) + "\n";
    if (text.size() > limits_.max_gbnf_bytes)
      return fail("#", "schema compiles to more than ", limits_.max_gbnf_bytes, " bytes of grammar");
    return text;
  }

 private:
  template <class... Parts>
  Error fail(const std::string& ptr, const Parts&... parts) {
    Error e = err("json schema error at ", ptr, ": ", parts...);
    e.code = "json_schema";
    return e;
  }

  std::string use(const std::string& primitive) {
    if (primitives_.insert(primitive).second) {
      auto it = kPrimitiveUses.find(primitive);
      if (it != kPrimitiveUses.end())
        for (const std::string& p : it->second) use(p);
    }
    return primitive;
  }

  // A fresh rule name from `hint` (letters, digits, dashes).
  std::string new_name(const std::string& hint) {
    std::string base;
    for (char c : hint) base += ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : '-';
    if (base.empty() || base.size() > 48) base = base.empty() ? "r" : base.substr(0, 48);
    std::string name = base;
    for (int i = 2; taken_.count(name) || kPrimitives.count(name) || name == "root"; ++i)
      name = base + "-" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  Status add_rule(const std::string& ptr, const std::string& name, std::string body) {
    if (rules_.size() >= limits_.max_rules)
      return fail(ptr, "schema needs more than ", limits_.max_rules, " grammar rules");
    bytes_ += name.size() + body.size();
    if (bytes_ > limits_.max_gbnf_bytes)
      return fail(ptr, "schema compiles to more than ", limits_.max_gbnf_bytes, " bytes of grammar");
    rules_.emplace_back(name, std::move(body));
    return {};
  }

  Status check_keywords(const Json& s, const std::string& ptr) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (kAnnotations.count(it.key()) || kKeywords.count(it.key())) continue;
      return fail(ptr + "/" + pointer_token(it.key()), "unsupported keyword '", it.key(), "'");
    }
    return {};
  }

  Result<std::string> visit(const Json& s, const std::string& ptr, const std::string& name, int depth) {
    if (depth > limits_.max_depth) return fail(ptr, "schema nested deeper than ", limits_.max_depth);
    if (++visits_ > limits_.max_rules * 4) return fail(ptr, "schema is too large to compile");
    if (s.is_boolean()) {
      if (s.get<bool>()) return use("json-value");
      return fail(ptr, "schema is false, which no value matches");
    }
    if (!s.is_object()) return fail(ptr, "a schema must be an object or a boolean, not ", s.type_name());
    DUET_TRY(check_keywords(s, ptr));
    if (s.contains("$ref")) return visit_ref(s, ptr, depth);
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) return visit_enum(s["enum"], ptr + "/enum");
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) return visit_any_of(s, k, ptr, name, depth);
    if (s.contains("allOf")) return visit_all_of(s, ptr, name, depth);
    return visit_types(s, ptr, name, depth);
  }

  Result<std::string> visit_enum(const Json& values, const std::string& ptr) {
    if (!values.is_array() || values.empty()) return fail(ptr, "enum must be a non-empty array");
    std::vector<std::string> alts;
    for (const Json& v : values) alts.push_back(gbnf_literal(v.dump()));
    return gbnf_group(alts);
  }

  Result<std::string> visit_any_of(const Json& s, const char* key, const std::string& ptr, const std::string& name,
                                   int depth) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != key && !kAnnotations.count(it.key()) && it.key() != "$defs" && it.key() != "definitions")
        return fail(ptr + "/" + pointer_token(it.key()), "keyword '", it.key(), "' beside ", key, " is not supported");
    const Json& list = s[key];
    const std::string lp = ptr + "/" + key;
    if (!list.is_array() || list.empty()) return fail(lp, key, " must be a non-empty array");
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      DUET_ASSIGN(std::string alt, visit(list[i], lp + "/" + std::to_string(i), name + "-" + std::to_string(i), depth + 1));
      alts.push_back(alt);
    }
    return gbnf_group(alts);
  }

  // JSON pointer within the document ("#", "#/$defs/a", ...).
  Result<const Json*> resolve(const std::string& ref, const std::string& ptr) {
    if (ref.empty() || ref[0] != '#') return fail(ptr, "$ref '", ref, "' is not supported (only refs within the schema, '#...')");
    const Json* cur = &root_;
    size_t pos = 1;
    if (pos < ref.size() && ref[pos] != '/') return fail(ptr, "$ref '", ref, "' is not a JSON pointer");
    while (pos < ref.size()) {
      const size_t next = ref.find('/', pos + 1);
      std::string token = ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      pos = next == std::string::npos ? ref.size() : next;
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size()) {
          key += token[i + 1] == '1' ? '/' : '~';
          ++i;
        } else {
          key += token[i];
        }
      }
      if (cur->is_object() && cur->contains(key)) {
        cur = &(*cur)[key];
      } else if (cur->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < cur->size()) {
        cur = &(*cur)[std::stoul(key)];
      } else {
        return fail(ptr, "$ref '", ref, "' does not resolve");
      }
    }
    return cur;
  }

  Result<std::string> visit_ref(const Json& s, const std::string& ptr, int depth) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != "$ref" && !kAnnotations.count(it.key()) && it.key() != "$defs" && it.key() != "definitions")
        return fail(ptr + "/" + pointer_token(it.key()), "keyword '", it.key(), "' beside $ref is not supported");
    if (!s["$ref"].is_string()) return fail(ptr + "/$ref", "$ref must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    auto known = refs_.find(ref);
    if (known != refs_.end()) return known->second;
    DUET_ASSIGN(const Json* target, resolve(ref, ptr + "/$ref"));
    const size_t slash = ref.rfind('/');
    const std::string name = new_name(slash == std::string::npos || slash + 1 == ref.size() ? "root-ref" : ref.substr(slash + 1));
    refs_[ref] = name;  // before the body, so recursion finds it
    DUET_ASSIGN(std::string body, visit(*target, ref, name, depth + 1));
    DUET_TRY(add_rule(ptr, name, std::move(body)));
    return name;
  }

  // Follows $refs to the schema they name (for allOf merging).
  Result<const Json*> deref(const Json* s, const std::string& ptr) {
    for (int hops = 0; s->is_object() && s->contains("$ref"); ++hops) {
      if (hops > 32) return fail(ptr, "$ref chain too long");
      const Json& r = (*s)["$ref"];
      if (!r.is_string()) return fail(ptr + "/$ref", "$ref must be a string");
      DUET_ASSIGN(s, resolve(r.get<std::string>(), ptr));
    }
    return s;
  }

  // allOf of object schemas: their properties, required lists and
  // additionalProperties merged into one object schema.
  Result<std::string> visit_all_of(const Json& s, const std::string& ptr, const std::string& name, int depth) {
    const std::string ap = ptr + "/allOf";
    if (!s["allOf"].is_array() || s["allOf"].empty()) return fail(ap, "allOf must be a non-empty array");
    Json merged = Json::object();
    merged["type"] = "object";
    merged["properties"] = Json::object();
    merged["required"] = Json::array();
    std::vector<std::pair<const Json*, std::string>> parts;
    std::optional<std::set<std::string>> allowed;  // keys every part allows
    Json rest = s;
    rest.erase("allOf");
    parts.push_back({&rest, ptr});
    for (size_t i = 0; i < s["allOf"].size(); ++i) {
      const std::string p = ap + "/" + std::to_string(i);
      DUET_ASSIGN(const Json* part, deref(&s["allOf"][i], p));
      parts.push_back({part, p});
    }
    if (s["allOf"].size() == 1 && rest.size() == 0) return visit(s["allOf"][0], ap + "/0", name, depth + 1);
    for (const auto& [part, p] : parts) {
      if (!part->is_object()) return fail(p, "allOf parts must be object schemas");
      for (auto it = part->begin(); it != part->end(); ++it) {
        const std::string& k = it.key();
        if (kAnnotations.count(k) || k == "$defs" || k == "definitions") continue;
        if (k == "type") {
          if (it.value() != "object") return fail(p + "/type", "allOf is supported only for object schemas");
        } else if (k == "properties") {
          if (!it.value().is_object()) return fail(p + "/properties", "properties must be an object");
          for (auto prop = it.value().begin(); prop != it.value().end(); ++prop) {
            if (merged["properties"].contains(prop.key()))
              return fail(p + "/properties/" + pointer_token(prop.key()), "property '", prop.key(),
                          "' is defined in more than one allOf part (not supported)");
            merged["properties"][prop.key()] = prop.value();
          }
        } else if (k == "required") {
          if (!it.value().is_array()) return fail(p + "/required", "required must be an array");
          for (const Json& r : it.value()) merged["required"].push_back(r);
        } else if (k == "additionalProperties") {
          if (!it.value().is_boolean())
            return fail(p + "/additionalProperties", "a schema for additionalProperties inside allOf is not supported");
          if (!it.value().get<bool>()) {
            // As the spec reads it: this part allows only its own
            // properties, whatever the other parts declare.
            std::set<std::string> own;
            if (part->contains("properties") && (*part)["properties"].is_object())
              for (auto prop = (*part)["properties"].begin(); prop != (*part)["properties"].end(); ++prop)
                own.insert(prop.key());
            if (allowed) {
              std::set<std::string> both;
              for (const std::string& x : *allowed)
                if (own.count(x)) both.insert(x);
              own = std::move(both);
            }
            allowed = std::move(own);
          }
        } else {
          return fail(p + "/" + pointer_token(k), "keyword '", k, "' in allOf is not supported (only object schemas)");
        }
      }
    }
    if (allowed) {
      Json kept = Json::object();
      for (auto prop = merged["properties"].begin(); prop != merged["properties"].end(); ++prop)
        if (allowed->count(prop.key())) kept[prop.key()] = prop.value();
      for (const Json& r : merged["required"])
        if (r.is_string() && !allowed->count(r.get<std::string>()))
          return fail(ap, "required property '", r.get<std::string>(),
                      "' is excluded by additionalProperties: false in another part, so no object matches");
      merged["properties"] = kept;
      merged["additionalProperties"] = false;
    }
    // The merged schema's subschemas keep pointers into allOf; errors
    // inside them name the merged object.
    return visit_object(merged, ap, name, depth);
  }

  Result<std::string> visit_types(const Json& s, const std::string& ptr, const std::string& name, int depth) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) return fail(ptr + "/type", "type must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return fail(ptr + "/type", "type must be a string or an array of strings");
      }
    } else {
      types = inferred_types(s);
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      DUET_ASSIGN(std::string alt, visit_type(t, s, ptr, name, depth));
      alts.push_back(alt);
    }
    return gbnf_group(alts);
  }

  static std::vector<std::string> inferred_types(const Json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) return {"object"};
    for (const char* k : {"items", "prefixItems", "additionalItems", "minItems", "maxItems"})
      if (s.contains(k)) return {"array"};
    for (const char* k : {"minLength", "maxLength", "pattern", "format"})
      if (s.contains(k)) return {"string"};
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return {"number"};
    return {"any"};
  }

  Result<std::string> visit_type(const std::string& t, const Json& s, const std::string& ptr, const std::string& name,
                                 int depth) {
    if (t == "any") return use("json-value");
    if (t == "object") return visit_object(s, ptr, name, depth);
    if (t == "array") return visit_array(s, ptr, name, depth);
    if (t == "string") return visit_string(s, ptr, name);
    if (t == "integer") return visit_integer(s, ptr);
    if (t == "number") return visit_number(s, ptr);
    if (t == "boolean") return use("json-boolean");
    if (t == "null") return use("json-null");
    return fail(ptr + "/type", "unknown type '", t, "'");
  }

  Result<int> count_keyword(const Json& s, const char* key, const std::string& ptr, int fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return fail(ptr + "/" + key, key, " must be a non-negative integer");
    if (v.get<int64_t>() > limits_.max_length)
      return fail(ptr + "/" + key, key, " above ", limits_.max_length, " is not supported");
    return static_cast<int>(v.get<int64_t>());
  }

  Result<std::string> visit_string(const Json& s, const std::string& ptr, const std::string& name) {
    DUET_ASSIGN(int min, count_keyword(s, "minLength", ptr, 0));
    DUET_ASSIGN(int max, count_keyword(s, "maxLength", ptr, -1));
    if (max >= 0 && max < min) return fail(ptr + "/maxLength", "maxLength is below minLength");
    const bool bounded = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return fail(ptr + "/pattern", "pattern must be a string");
      if (bounded || s.contains("format"))
        return fail(ptr + "/pattern", "pattern together with minLength/maxLength/format is not supported");
      use("json-char");
      auto body = regex_to_gbnf(s["pattern"].get<std::string>(), "json-char");
      if (!body.ok()) return fail(ptr + "/pattern", body.error().message);
      const std::string rule = new_name(name + "-pattern");
      DUET_TRY(add_rule(ptr, rule, "\"\\\"\" " + *body + " \"\\\"\""));
      return rule;
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) return fail(ptr + "/format", "format must be a string");
      const std::string f = s["format"].get<std::string>();
      if (!kFormats.count(f)) return fail(ptr + "/format", "format '", f, "' is not supported (date, time, date-time, uuid are)");
      if (bounded) return fail(ptr + "/format", "format together with minLength/maxLength is not supported");
      return "\"\\\"\" " + use(f) + " \"\\\"\"";
    }
    if (!bounded) return use("json-string");
    use("json-char");
    const std::string reps = max < 0 ? "{" + std::to_string(min) + ",}"
                                     : "{" + std::to_string(min) + "," + std::to_string(max) + "}";
    return "\"\\\"\" json-char" + reps + " \"\\\"\"";
  }

  // An integer bound from minimum/maximum/exclusive*; nullopt when absent.
  Result<std::optional<int64_t>> integer_bound(const Json& s, const std::string& ptr, bool lower) {
    std::optional<double> bound;
    const char* inclusive = lower ? "minimum" : "maximum";
    const char* exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    if (s.contains(inclusive)) {
      if (!s[inclusive].is_number()) return fail(ptr + "/" + inclusive, inclusive, " must be a number");
      const double v = s[inclusive].get<double>();
      bound = lower ? std::ceil(v) : std::floor(v);
    }
    if (s.contains(exclusive)) {
      if (!s[exclusive].is_number())
        return fail(ptr + "/" + exclusive, exclusive, " must be a number (the draft-4 boolean form is not supported)");
      const double v = s[exclusive].get<double>();
      const double b = lower ? std::floor(v) + 1 : std::ceil(v) - 1;
      bound = bound ? (lower ? std::max(*bound, b) : std::min(*bound, b)) : b;
    }
    if (!bound) return std::optional<int64_t>();
    const double lim = static_cast<double>(kMaxJsonInteger);
    if ((lower && *bound > lim) || (!lower && *bound < -lim))
      return fail(ptr + "/" + inclusive, "bound beyond the largest integer the grammar writes (16 digits)");
    return std::optional<int64_t>(static_cast<int64_t>(std::clamp(*bound, -lim, lim)));
  }

  Result<std::string> visit_integer(const Json& s, const std::string& ptr) {
    DUET_ASSIGN(auto lo, integer_bound(s, ptr, true));
    DUET_ASSIGN(auto hi, integer_bound(s, ptr, false));
    if (!lo && !hi) return use("json-integer");
    if (lo && hi && *lo > *hi) return fail(ptr, "no integer lies between the minimum and the maximum");
    return gbnf_group({integer_range_gbnf(lo, hi)});
  }

  Result<std::string> visit_number(const Json& s, const std::string& ptr) {
    for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return fail(ptr + "/" + k, k, " on type number is not supported (use integer, or minimum/maximum)");
    std::optional<int64_t> lo, hi;
    for (const char* k : {"minimum", "maximum"}) {
      if (!s.contains(k)) continue;
      const Json& v = s[k];
      if (!v.is_number()) return fail(ptr + "/" + k, k, " must be a number");
      const double d = v.get<double>();
      if (d != std::floor(d) || std::fabs(d) > static_cast<double>(kMaxJsonInteger))
        return fail(ptr + "/" + k, k, " ", v.dump(), " on type number: only integer bounds are supported");
      (k[1] == 'i' ? lo : hi) = static_cast<int64_t>(d);
    }
    if (!lo && !hi) return use("json-number");
    if (lo && hi && *lo > *hi) return fail(ptr, "minimum is above maximum");
    return gbnf_group({number_range_gbnf(lo, hi)});
  }

  // Keys that are JSON strings but none of `names` (plain ASCII names only;
  // otherwise any key).
  Result<std::string> other_key(const std::vector<std::string>& names, const std::string& ptr, const std::string& name) {
    for (const std::string& n : names)
      for (char c : n)
        if (static_cast<uint8_t>(c) < 0x20 || static_cast<uint8_t>(c) >= 0x7F || c == '"' || c == '\\')
          return use("json-string");
    if (names.empty()) return use("json-string");
    use("json-char");
    // A trie of the names; each node's rule is "what may follow this
    // prefix so the key is not one of the names".
    std::map<std::string, std::string> node_rule;
    std::set<std::string> prefixes, words(names.begin(), names.end());
    for (const std::string& n : names)
      for (size_t i = 0; i <= n.size(); ++i) prefixes.insert(n.substr(0, i));
    for (const std::string& p : prefixes) node_rule[p] = new_name(name + "-other-key");
    for (const std::string& p : prefixes) {
      std::vector<std::string> alts;
      if (!words.count(p)) alts.push_back("\"\"");
      std::vector<CodeRange> stop = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      for (const std::string& q : prefixes)
        if (q.size() == p.size() + 1 && q.compare(0, p.size(), p) == 0) {
          const auto c = static_cast<uint8_t>(q.back());
          alts.push_back(gbnf_literal(std::string(1, static_cast<char>(c))) + " " + node_rule[q]);
          stop.push_back({c, c});
        }
      alts.push_back(gbnf_class(complement_ranges(normalize_ranges(stop))) + " json-char*");
      alts.push_back("\"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) json-char*");
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
      DUET_TRY(add_rule(ptr, node_rule[p], body));
    }
    return "\"\\\"\" " + node_rule[""] + " \"\\\"\"";
  }

  Result<std::string> visit_object(const Json& s, const std::string& ptr, const std::string& name, int depth) {
    use("ws");
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> props;
    std::vector<std::string> names;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return fail(ptr + "/required", "required must be an array of strings");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return fail(ptr + "/required", "required must be an array of strings");
        required.insert(r.get<std::string>());
      }
    }
    Json properties = s.contains("properties") ? s["properties"] : Json::object();
    if (!properties.is_object()) return fail(ptr + "/properties", "properties must be an object");
    for (const std::string& r : required)
      if (!properties.contains(r)) properties[r] = true;  // required but undescribed: any value
    for (auto it = properties.begin(); it != properties.end(); ++it) {
      const std::string pp = ptr + "/properties/" + pointer_token(it.key());
      DUET_ASSIGN(std::string value, visit(it.value(), pp, name + "-" + it.key(), depth + 1));
      props.push_back({gbnf_literal(Json(it.key()).dump()) + " ws \":\" ws " + value, required.count(it.key()) > 0});
      names.push_back(it.key());
    }
    std::string extra;  // one extra key-value pair, or empty if none allowed
    const Json additional = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    if (!(additional.is_boolean() && !additional.get<bool>())) {
      DUET_ASSIGN(std::string value, visit(additional, ptr + "/additionalProperties", name + "-extra", depth + 1));
      DUET_ASSIGN(std::string key, other_key(names, ptr, name));
      extra = key + " ws \":\" ws " + value;
    }
    // tail[i]: after something was written, properties i.. then extras.
    const size_t n = props.size();
    std::vector<std::string> tail(n + 1);
    tail[n] = extra.empty() ? "" : "(ws \",\" ws " + extra + ")*";
    for (size_t i = n; i-- > 0;) {
      std::string item = "(ws \",\" ws " + props[i].kv + ")" + (props[i].required ? "" : "?");
      std::string body = tail[i + 1].empty() ? item : item + " " + tail[i + 1];
      if (i + 1 < n || !tail[n].empty()) {  // shared by several firsts: a rule
        const std::string rule = new_name(name + "-tail");
        DUET_TRY(add_rule(ptr, rule, body));
        body = rule;
      }
      tail[i] = body;
    }
    // The first property written is some optional one before the first
    // required one, or that required one; with none required, maybe none.
    std::vector<std::string> firsts;
    bool all_optional = true;
    for (size_t i = 0; i < n; ++i) {
      firsts.push_back(props[i].kv + (tail[i + 1].empty() ? "" : " " + tail[i + 1]));
      if (props[i].required) {
        all_optional = false;
        break;
      }
    }
    if (all_optional && !extra.empty()) firsts.push_back(extra + " " + tail[n]);
    std::string content;
    if (!firsts.empty()) {
      for (size_t i = 0; i < firsts.size(); ++i) content += (i ? " | " : "") + firsts[i];
      content = "(" + content + ")" + (all_optional ? "?" : "");
    }
    return "(\"{\" ws " + content + (content.empty() ? "" : " ") + "ws \"}\")";
  }

  Result<std::string> visit_array(const Json& s, const std::string& ptr, const std::string& name, int depth) {
    use("ws");
    DUET_ASSIGN(int min, count_keyword(s, "minItems", ptr, 0));
    DUET_ASSIGN(int max, count_keyword(s, "maxItems", ptr, -1));
    if (max >= 0 && max < min) return fail(ptr + "/maxItems", "maxItems is below minItems");
    std::vector<std::string> prefix;
    Json extra_schema = true;
    std::string extra_ptr = ptr + "/items";
    const Json* tuple = nullptr;
    std::string tuple_key;
    if (s.contains("prefixItems")) {
      tuple = &s["prefixItems"];
      tuple_key = "prefixItems";
      if (s.contains("items")) extra_schema = s["items"];
    } else if (s.contains("items") && s["items"].is_array()) {
      tuple = &s["items"];  // the older tuple form
      tuple_key = "items";
      extra_ptr = ptr + "/additionalItems";
      if (s.contains("additionalItems")) extra_schema = s["additionalItems"];
    } else if (s.contains("items")) {
      extra_schema = s["items"];
    }
    if (tuple) {
      if (!tuple->is_array()) return fail(ptr + "/" + tuple_key, tuple_key, " must be an array");
      if (tuple->size() > 64) return fail(ptr + "/" + tuple_key, "more than 64 tuple items is not supported");
      for (size_t i = 0; i < tuple->size(); ++i) {
        DUET_ASSIGN(std::string item, visit((*tuple)[i], ptr + "/" + tuple_key + "/" + std::to_string(i),
                                            name + "-" + std::to_string(i), depth + 1));
        prefix.push_back(item);
      }
    }
    std::string extra;
    if (!(extra_schema.is_boolean() && !extra_schema.get<bool>())) {
      DUET_ASSIGN(extra, visit(extra_schema, extra_ptr, name + "-item", depth + 1));
    }
    if (max == 0) return std::string("(\"[\" ws \"]\")");
    const int k = static_cast<int>(prefix.size());
    const int cap = max < 0 ? INT32_MAX : max;
    // rest(j): items j.. after item j-1; tuple items one by one, then extras.
    const int extra_min = std::max(0, min - k);
    std::string rest;
    if (!extra.empty() && cap > k) {
      const std::string bound = "{" + std::to_string(extra_min) + "," + (max < 0 ? "" : std::to_string(max - k)) + "}";
      rest = "(ws \",\" ws " + extra + ")" + bound;
    } else if (extra_min > 0) {
      return fail(ptr + "/minItems", "minItems needs more items than the schema allows");
    }
    std::string first = extra;  // item 0 when there is no tuple
    for (int j = std::min(k, cap) - 1; j >= 0; --j) {
      const std::string item = prefix[static_cast<size_t>(j)];
      if (j == 0) {
        first = item + (rest.empty() ? "" : " " + rest);
      } else {
        rest = "(ws \",\" ws " + item + (rest.empty() ? "" : " " + rest) + ")" + (j >= min ? "?" : "");
      }
    }
    if (k == 0) {
      if (extra.empty()) {
        if (min > 0) return fail(ptr + "/minItems", "minItems needs items but items is false");
        return std::string("(\"[\" ws \"]\")");
      }
      const std::string more = "{" + std::to_string(std::max(0, min - 1)) + "," + (max < 0 ? "" : std::to_string(max - 1)) + "}";
      first = extra + " (ws \",\" ws " + extra + ")" + more;
    }
    return "(\"[\" ws " + ("(" + first + ")") + (min == 0 ? "?" : "") + " ws \"]\")";
  }

  const Json& root_;
  JsonSchemaLimits limits_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> primitives_;
  std::set<std::string> taken_;
  std::map<std::string, std::string> refs_;
  size_t bytes_ = 0;
  size_t visits_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema_json, const JsonSchemaLimits& limits) {
  auto parsed = parse_json<Json>(schema_json);
  if (!parsed.ok()) {
    Error e = err("json schema error: the schema is ",
                  parsed.error().code == "json_too_deep" ? parsed.error().message : "not valid JSON");
    e.code = "json_schema";
    return e;
  }
  return SchemaCompiler(*parsed, limits).compile();
}

Result<std::shared_ptr<const Grammar>> json_schema_to_grammar(std::string_view schema_json,
                                                              const JsonSchemaLimits& limits) {
  DUET_ASSIGN(std::string gbnf, json_schema_to_gbnf(schema_json, limits));
  auto g = Grammar::from_gbnf(gbnf);
  if (!g.ok()) {
    Error e = err("json schema error: the schema compiles to a grammar that cannot be used (",
                  g.error().message, ")");
    e.code = "json_schema";
    return e;
  }
  return g;
}

std::string json_object_gbnf() {
  auto g = json_schema_to_gbnf(R"({"type":"object"})");
  return g.ok() ? *g : std::string();
}

}  // namespace duet
