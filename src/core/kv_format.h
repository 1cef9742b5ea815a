// Storage formats of the KV cache (--kv-type). The cache keeps one token's K
// (or V) for one KV head as a "row" of head_dim elements; a quantized row
// carries fp16 scales beside it. Both the cache (src/kv/) and the attention
// kernel (src/kernels/) read rows through these definitions, which is why
// they live in core.
//
//   f32  head_dim floats                       (exact; the reference)
//   f16  head_dim IEEE halves                  (round to nearest even)
//   q8   head_dim int8, symmetric, one fp16 scale per token per head
//   q4   head_dim 4-bit, symmetric, one fp16 scale per group of kKvQ4Group
//        elements of a token's head row (per-token, per-head groups; the
//        last group is shorter when head_dim is not a multiple of the group)
//
// A scale is stored as fp16 to keep bytes down: with head_dim = 64 a q8 row
// is 64 + 2 bytes against f16's 128, 1.94x the tokens in the same memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace duet {

enum class KvType : uint8_t { F32, F16, Q8, Q4 };

constexpr int32_t kKvQ4Group = 32;

// "f32", "f16", "q8", "q4".
std::string_view kv_type_name(KvType t);
// The inverse of kv_type_name; an error naming the accepted values otherwise.
Result<KvType> parse_kv_type(std::string_view name);

// Whether rows of head_dim elements can be stored as t (q4 packs pairs).
Status check_kv_type(KvType t, int32_t head_dim);

// Bytes of one row's elements (without scales). q4 needs an even head_dim.
size_t kv_row_bytes(KvType t, int32_t head_dim);
// fp16 scales of one row: 0 for f32/f16, 1 for q8, one per group for q4.
int32_t kv_row_scales(KvType t, int32_t head_dim);
// Everything one row costs: elements plus scales.
inline size_t kv_row_total_bytes(KvType t, int32_t head_dim) {
  return kv_row_bytes(t, head_dim) + static_cast<size_t>(kv_row_scales(t, head_dim)) * 2;
}

// Encodes x[head_dim] into row (kv_row_bytes) and scales (kv_row_scales).
void kv_quantize_row(KvType t, const float* x, int32_t head_dim, uint8_t* row, uint16_t* scales);
// Decodes a row back to out[head_dim].
void kv_dequantize_row(KvType t, const uint8_t* row, const uint16_t* scales, int32_t head_dim,
                       float* out);

// A q4 element's 4-bit code (0..15) in packed row `row`: element 2j in the low
// nibble of byte j, element 2j+1 in the high nibble; value = code - 8.
inline int32_t kv_q4_code(const uint8_t* row, int32_t i) {
  return (row[i >> 1] >> ((i & 1) * 4)) & 0xf;
}

}  // namespace duet
