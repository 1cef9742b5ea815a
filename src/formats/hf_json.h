// Reading a Hugging Face config.json's keys with the defaults of the
// transformers configuration classes: a key that is absent or null keeps
// its default; a present one must have the right type and range. For
// parse_hf_config and the architectures' own keys (formats/arch/).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace duet::hf_json {

using nlohmann::json;

// Far above any real model; keeps products of dimensions inside int64.
constexpr int64_t kMaxDim = 1 << 20;

// A key that is absent or null reads as its default.
inline const json* field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline Status read_int(const json& j, const char* key, const std::string& src, int64_t lo, int64_t hi, int32_t* out,
                       bool required = false) {
  const json* v = field(j, key);
  if (!v) {
    if (required) return err(src, ": missing \"", key, "\"");
    return {};
  }
  if (!v->is_number_integer()) return err(src, ": \"", key, "\" must be an integer, not ", v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) return err(src, ": \"", key, "\" = ", x, " is out of range (", lo, "..", hi, ")");
  *out = static_cast<int32_t>(x);
  return {};
}

template <class Float>
Status read_float(const json& j, const char* key, const std::string& src, Float* out) {
  const json* v = field(j, key);
  if (!v) return {};
  if (!v->is_number()) return err(src, ": \"", key, "\" must be a number, not ", v->dump());
  const double x = v->get<double>();
  if (!std::isfinite(x)) return err(src, ": \"", key, "\" is not finite");
  *out = static_cast<Float>(x);
  return {};
}

inline Status read_bool(const json& j, const char* key, const std::string& src, bool* out) {
  const json* v = field(j, key);
  if (!v) return {};
  if (!v->is_boolean()) return err(src, ": \"", key, "\" must be true or false, not ", v->dump());
  *out = v->get<bool>();
  return {};
}

// A mixture's expert count (under `count_key`) and num_experts_per_tok,
// each keeping its default unless given (or required), the second at most the first.
inline Status read_expert_counts(const json& j, const char* count_key, const std::string& src, int32_t* count,
                                 int32_t* used, bool required = false) {
  DUET_TRY(read_int(j, count_key, src, 1, 4096, count, required));
  DUET_TRY(read_int(j, "num_experts_per_tok", src, 1, 4096, used, required));
  if (*used > *count) return err(src, ": num_experts_per_tok ", *used, " is more than the ", *count, " experts");
  return {};
}

}  // namespace duet::hf_json
