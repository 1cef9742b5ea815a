// The two inner loops of paged attention for each KV storage type, so that K
// and V are dequantized in registers as attention reads them and the cache
// is never copied out as floats. Rows are one token's K (or V) of one KV head
// (core/kv_format.h): `rows` points at the first, the next is kv_row_bytes
// further; `scales` at its fp16 scales, the next row's kv_row_scales further.
#pragma once

#include <cstdint>

#include "core/kv_format.h"

namespace duet {

struct KvRowKernels {
  // s[t] = q · K[t] for t < n.
  void (*scores)(const float* q, const uint8_t* rows, const uint16_t* scales, int32_t n,
                 int32_t head_dim, float* s);
  // out[head_dim] += Σ_t p[t] · V[t] for t < n.
  void (*accumulate)(const float* p, const uint8_t* rows, const uint16_t* scales, int32_t n,
                     int32_t head_dim, float* out);
};

// The kernels of each KV type at one level (kernels/registry.h picks; a
// level without its own version of a type runs the level below's). AVX-512
// adds nothing over AVX2 for rows this short (head_dim 64-128).
struct KvTypeKernels {
  KvRowKernels f32, f16, q8, q4;
};
extern const KvTypeKernels kKvScalar, kKvAvx2;

}  // namespace duet
