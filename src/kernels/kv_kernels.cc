// Scalar reference kernels of the KV storage types, and the dispatch from
// (type, CPU level) to kernels. A quantized row's scale multiplies the whole
// integer dot (or the weight p of a value row) once instead of every element.
#include "kernels/kv_kernels.h"

#include <algorithm>

#include "core/half.h"

namespace duet {
namespace {

struct F32Row {
  static float dot(const float* q, const uint8_t* row, const uint16_t*, int32_t hd) {
    const auto* k = reinterpret_cast<const float*>(row);
    float s = 0.0f;
    for (int32_t i = 0; i < hd; ++i) s += q[i] * k[i];
    return s;
  }
  static void axpy(float p, const uint8_t* row, const uint16_t*, int32_t hd, float* out) {
    const auto* v = reinterpret_cast<const float*>(row);
    for (int32_t i = 0; i < hd; ++i) out[i] += p * v[i];
  }
};

struct F16Row {
  static float dot(const float* q, const uint8_t* row, const uint16_t*, int32_t hd) {
    const auto* k = reinterpret_cast<const uint16_t*>(row);
    float s = 0.0f;
    for (int32_t i = 0; i < hd; ++i) s += q[i] * f16_to_f32(k[i]);
    return s;
  }
  static void axpy(float p, const uint8_t* row, const uint16_t*, int32_t hd, float* out) {
    const auto* v = reinterpret_cast<const uint16_t*>(row);
    for (int32_t i = 0; i < hd; ++i) out[i] += p * f16_to_f32(v[i]);
  }
};

struct Q8Row {
  static float dot(const float* q, const uint8_t* row, const uint16_t* scale, int32_t hd) {
    const auto* k = reinterpret_cast<const int8_t*>(row);
    float s = 0.0f;
    for (int32_t i = 0; i < hd; ++i) s += q[i] * static_cast<float>(k[i]);
    return s * f16_to_f32(*scale);
  }
  static void axpy(float p, const uint8_t* row, const uint16_t* scale, int32_t hd, float* out) {
    const auto* v = reinterpret_cast<const int8_t*>(row);
    const float c = p * f16_to_f32(*scale);
    for (int32_t i = 0; i < hd; ++i) out[i] += c * static_cast<float>(v[i]);
  }
};

struct Q4Row {
  static float dot(const float* q, const uint8_t* row, const uint16_t* scales, int32_t hd) {
    float s = 0.0f;
    for (int32_t start = 0, g = 0; start < hd; start += kKvQ4Group, ++g) {
      const int32_t end = std::min(hd, start + kKvQ4Group);
      float sg = 0.0f;
      for (int32_t i = start; i < end; ++i) sg += q[i] * static_cast<float>(kv_q4_code(row, i) - 8);
      s += sg * f16_to_f32(scales[g]);
    }
    return s;
  }
  static void axpy(float p, const uint8_t* row, const uint16_t* scales, int32_t hd, float* out) {
    for (int32_t start = 0, g = 0; start < hd; start += kKvQ4Group, ++g) {
      const int32_t end = std::min(hd, start + kKvQ4Group);
      const float c = p * f16_to_f32(scales[g]);
      for (int32_t i = start; i < end; ++i) out[i] += c * static_cast<float>(kv_q4_code(row, i) - 8);
    }
  }
};

template <class R, KvType T>
void scores(const float* q, const uint8_t* rows, const uint16_t* scales, int32_t n, int32_t hd,
            float* s) {
  const size_t row_bytes = kv_row_bytes(T, hd);
  const int32_t n_scales = kv_row_scales(T, hd);
  for (int32_t t = 0; t < n; ++t) s[t] = R::dot(q, rows + t * row_bytes, scales + t * n_scales, hd);
}

template <class R, KvType T>
void accumulate(const float* p, const uint8_t* rows, const uint16_t* scales, int32_t n,
                int32_t hd, float* out) {
  const size_t row_bytes = kv_row_bytes(T, hd);
  const int32_t n_scales = kv_row_scales(T, hd);
  for (int32_t t = 0; t < n; ++t) R::axpy(p[t], rows + t * row_bytes, scales + t * n_scales, hd, out);
}

template <class R, KvType T>
constexpr KvRowKernels make() {
  return {scores<R, T>, accumulate<R, T>};
}

constexpr KvRowKernels kF32 = make<F32Row, KvType::F32>();
constexpr KvRowKernels kF16 = make<F16Row, KvType::F16>();
constexpr KvRowKernels kQ8 = make<Q8Row, KvType::Q8>();
constexpr KvRowKernels kQ4 = make<Q4Row, KvType::Q4>();

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
