// The two inner loops of paged attention for each KV storage type, so that K
// and V are dequantized in registers as attention reads them and the cache
// is never copied out as floats. Rows are one token's K (or V) of one KV head
// (core/kv_format.h): `rows` points at the first, the next is kv_row_bytes
// further; `scales` at its fp16 scales, the next row's kv_row_scales further.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
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

// The kernels of t at one level; a level without its own version of t falls
// back to the level below.
const KvRowKernels* kv_row_kernels_scalar(KvType t);
const KvRowKernels* kv_row_kernels_avx2(KvType t);  // nullptr where AVX2 has none
const KvRowKernels* kv_row_kernels_at(KvType t, CpuLevel level);
// For the active CPU level, chosen once.
const KvRowKernels* kv_row_kernels(KvType t);

}  // namespace duet
