// Reading a request body's JSON object field by field, strictly: each
// reader names the field in its error, and whatever was never read can be
// reported as an unknown field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/json_parse.h"
#include "server/api_error.h"

namespace duet::server {

class Fields {
 public:
  explicit Fields(const nlohmann::json& obj) : obj_(obj) {}

  // The field, or nullptr when absent or null (OpenAI treats null as unset).
  const nlohmann::json* get(const std::string& key) {
    seen_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::optional<std::string> unknown() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!seen_.count(it.key())) return it.key();
    return std::nullopt;
  }

 private:
  const nlohmann::json& obj_;
  std::set<std::string> seen_;
};

// A request body: one JSON object, nested at most kMaxJsonDepth deep (the
// bound every endpoint shares, checked while parsing: core/json_parse.h).
template <class J = nlohmann::json>
std::optional<ApiError> parse_body(std::string_view body, J& out) {
  std::string field;
  auto parsed = parse_json<J>(body, kMaxJsonDepth, &field);
  if (!parsed.ok()) {
    if (parsed.error().code == "json_too_deep")
      return invalid(field.empty() ? "the request body is " + parsed.error().message
                                   : "'" + field + "' is " + parsed.error().message,
                     field, "json_too_deep");
    return invalid("the request body is not valid JSON");
  }
  if (!parsed->is_object()) return invalid("the request body must be a JSON object");
  out = std::move(*parsed);
  return std::nullopt;
}

inline ApiError wrong_type(const std::string& field, const char* expected) {
  return invalid("'" + field + "' must be " + expected, field);
}

inline std::optional<ApiError> read_bool(Fields& f, const std::string& key, bool& out) {
  const nlohmann::json* v = f.get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(key, "a boolean");
  out = v->get<bool>();
  return std::nullopt;
}

}  // namespace duet::server
