// Scalar row kernels of each KV storage type, as inline templates: the
// reference table (kv_kernels.cc) is built from them, and attention inlines
// the f32 ones so its f32 path costs no indirect call. Include only from
// baseline (non-AVX) files: an inline function with external linkage built
// with AVX flags could be chosen by the linker for baseline callers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/half.h"
#include "core/kv_format.h"

namespace duet::kv_rows {

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
inline void scores(const float* q, const uint8_t* rows, const uint16_t* scales, int32_t n, int32_t hd,
            float* s) {
  const size_t row_bytes = kv_row_bytes(T, hd);
  const int32_t n_scales = kv_row_scales(T, hd);
  for (int32_t t = 0; t < n; ++t) s[t] = R::dot(q, rows + t * row_bytes, scales + t * n_scales, hd);
}

template <class R, KvType T>
inline void accumulate(const float* p, const uint8_t* rows, const uint16_t* scales, int32_t n,
                int32_t hd, float* out) {
  const size_t row_bytes = kv_row_bytes(T, hd);
  const int32_t n_scales = kv_row_scales(T, hd);
  for (int32_t t = 0; t < n; ++t) R::axpy(p[t], rows + t * row_bytes, scales + t * n_scales, hd, out);
}

}  // namespace duet::kv_rows
