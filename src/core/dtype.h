// Element and block types. The numeric values are GGUF's (ggml_type), so a
// tensor's type field can be read straight from a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace duet {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
};

struct DTypeTraits {
  std::string_view name;
  int64_t block_elems;  // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
};

// Traits of a known type; nullptr for a value duet does not know.
const DTypeTraits* dtype_traits(uint32_t raw);
inline const DTypeTraits& traits(DType t) { return *dtype_traits(static_cast<uint32_t>(t)); }

std::string_view dtype_name(DType t);
Result<DType> parse_dtype(std::string_view name);  // "f32", "q8_0", ... (case-insensitive)

// Bytes of a row of n elements; an error if n does not divide into blocks.
Result<size_t> row_bytes(DType t, int64_t n);

}  // namespace duet
