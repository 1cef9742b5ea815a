// Reading a request body's JSON object field by field, strictly: each
// reader names the field in its error, and whatever was never read can be
// reported as an unknown field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

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
