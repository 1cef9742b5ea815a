// Reading a GGUF file's hyper-parameter keys with their ranges checked, for
// read_model_config and the architectures' own keys (formats/arch/).
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"

namespace duet::gguf_read {

// Far above any real model, low enough that products of these fit in int64.
constexpr uint64_t kMaxDim = 1u << 20;
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxExperts = 4096;

// A dimension in [1, max].
inline Result<int32_t> dim(const GgufFile& f, const std::string& key, uint64_t max) {
  DUET_ASSIGN(uint64_t v, f.get_uint(key));
  if (v == 0 || v > max) return err(f.path(), ": ", key, " = ", v, " is out of range (1..", max, ")");
  return static_cast<int32_t>(v);
}

inline Result<int32_t> dim_or(const GgufFile& f, const std::string& key, uint64_t fallback, uint64_t max) {
  if (!f.has(key)) return static_cast<int32_t>(fallback);
  return dim(f, key, max);
}

inline Result<float> positive_float_or(const GgufFile& f, const std::string& key, double fallback) {
  DUET_ASSIGN(double v, f.get_float_or(key, fallback));
  if (!(v >= 0.0 && v < 1e9)) return err(f.path(), ": ", key, " = ", v, " is out of range");
  return static_cast<float>(v);
}

}  // namespace duet::gguf_read
