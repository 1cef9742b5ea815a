// AVX2 kernels of the f16 and q8 KV types: 8 elements of a row are widened to
// floats in registers (F16C for halves, sign extension for int8) and fused
// into the dot or the accumulation; a tail shorter than 8 is done in scalar.
// f32 keeps the scalar loops (identical numerics to before quantized KV), q4
// keeps them too.
#include <immintrin.h>

#include "kernels/kv_kernels.h"

// No core/half.h here: an inline function with external linkage built with
// AVX2 flags could be chosen by the linker for baseline callers too.
namespace duet {
namespace {

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Each loads 8 elements of a row at element offset i as floats, and reads one
// element for the tail.
struct F16Row {
  static constexpr KvType kType = KvType::F16;
  static __m256 load8(const uint8_t* row, int32_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  static float at(const uint8_t* row, int32_t i) {
    return f16(reinterpret_cast<const uint16_t*>(row)[i]);
  }
  static float scale(const uint16_t*) { return 1.0f; }
};

struct Q8Row {
  static constexpr KvType kType = KvType::Q8;
  static __m256 load8(const uint8_t* row, int32_t i) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
  static float at(const uint8_t* row, int32_t i) {
    return static_cast<float>(reinterpret_cast<const int8_t*>(row)[i]);
  }
  static float scale(const uint16_t* s) { return f16(*s); }
};

template <class R>
float dot(const float* q, const uint8_t* row, int32_t hd) {
  __m256 acc = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= hd; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), R::load8(row, i), acc);
  float s = hsum(acc);
  for (; i < hd; ++i) s += q[i] * R::at(row, i);
  return s;
}

template <class R>
void axpy(float c, const uint8_t* row, int32_t hd, float* out) {
  const __m256 cv = _mm256_set1_ps(c);
  int32_t i = 0;
  for (; i + 8 <= hd; i += 8)
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(cv, R::load8(row, i), _mm256_loadu_ps(out + i)));
  for (; i < hd; ++i) out[i] += c * R::at(row, i);
}

template <class R>
void scores(const float* q, const uint8_t* rows, const uint16_t* scales, int32_t n, int32_t hd,
            float* s) {
  const size_t row_bytes = kv_row_bytes(R::kType, hd);
  const int32_t n_scales = kv_row_scales(R::kType, hd);
  for (int32_t t = 0; t < n; ++t)
    s[t] = dot<R>(q, rows + t * row_bytes, hd) * R::scale(scales + t * n_scales);
}

template <class R>
void accumulate(const float* p, const uint8_t* rows, const uint16_t* scales, int32_t n,
                int32_t hd, float* out) {
  const size_t row_bytes = kv_row_bytes(R::kType, hd);
  const int32_t n_scales = kv_row_scales(R::kType, hd);
  for (int32_t t = 0; t < n; ++t)
    axpy<R>(p[t] * R::scale(scales + t * n_scales), rows + t * row_bytes, hd, out);
}

constexpr KvRowKernels kF16 = {scores<F16Row>, accumulate<F16Row>};
constexpr KvRowKernels kQ8 = {scores<Q8Row>, accumulate<Q8Row>};

}  // namespace

const KvRowKernels* kv_row_kernels_avx2(KvType t) {
  switch (t) {
    case KvType::F16: return &kF16;
    case KvType::Q8: return &kQ8;
    default: return nullptr;
  }
}

}  // namespace duet
