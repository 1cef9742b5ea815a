// Scalar reference kernels of the KV storage types, and the dispatch from
// (type, CPU level) to kernels. A quantized row's scale multiplies the whole
// integer dot (or the weight p of a value row) once instead of every element.
#include "kernels/kv_kernels.h"

#include "kernels/kv_rows.h"

namespace duet {
namespace {

template <class R, KvType T>
constexpr KvRowKernels make() {
  return {kv_rows::scores<R, T>, kv_rows::accumulate<R, T>};
}

constexpr KvRowKernels kF32 = make<kv_rows::F32Row, KvType::F32>();
constexpr KvRowKernels kF16 = make<kv_rows::F16Row, KvType::F16>();
constexpr KvRowKernels kQ8 = make<kv_rows::Q8Row, KvType::Q8>();
constexpr KvRowKernels kQ4 = make<kv_rows::Q4Row, KvType::Q4>();

}  // namespace

const KvRowKernels* kv_row_kernels_scalar(KvType t) {
  switch (t) {
    case KvType::F32: return &kF32;
    case KvType::F16: return &kF16;
    case KvType::Q8: return &kQ8;
    case KvType::Q4: return &kQ4;
  }
  return &kF32;
}

const KvRowKernels* kv_row_kernels_at(KvType t, CpuLevel level) {
  // AVX-512 adds nothing over AVX2 for rows this short (head_dim 64-128).
  if (level >= CpuLevel::kAvx2)
    if (const KvRowKernels* k = kv_row_kernels_avx2(t)) return k;
  return kv_row_kernels_scalar(t);
}

const KvRowKernels* kv_row_kernels(KvType t) {
  static const CpuLevel level = active_cpu_level();
  return kv_row_kernels_at(t, level);
}

}  // namespace duet
