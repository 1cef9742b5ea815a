// AVX2 kernels of the f16, q8 and q4 KV types: 8 elements of a row are
// widened to floats in registers (F16C for halves, sign extension for int8,
// shifts and masks for nibbles) and fused into the dot or the accumulation; a
// tail shorter than 8 is done in scalar. f32 keeps the scalar loops, whose
// results the f32 cache has always given.
#include <immintrin.h>

#include <cstring>

#include "kernels/kv_kernels.h"
#include "kernels/quant_simd.h"

namespace duet {
namespace {

// quant_simd's copies are file-local: an inline function with external
// linkage built with AVX2 flags could be chosen by the linker for baseline
// callers too.
using quant_simd::f16;
using quant_simd::hsum;

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

// q4: element 2j in the low nibble of byte j, 2j+1 in the high one (see
// core/kv_format.h); one fp16 scale per group of kKvQ4Group elements. Groups
// start at multiples of 32, so an 8-aligned chunk never straddles two.
inline int32_t q4_at(const uint8_t* row, int32_t i) { return ((row[i >> 1] >> ((i & 1) * 4)) & 0xf) - 8; }

// Elements i..i+7 (i a multiple of 8) as floats: each of 4 bytes goes to two
// lanes, shifted right by 0 or 4 and masked.
inline __m256 q4_load8(const uint8_t* row, int32_t i) {
  uint32_t bytes;
  std::memcpy(&bytes, row + i / 2, 4);
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i b = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bytes)), dup));
  const __m256i codes = _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                                         _mm256_set1_epi32(0xf));
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(codes, _mm256_set1_epi32(8)));
}

float q4_dot(const float* q, const uint8_t* row, const uint16_t* scales, int32_t hd) {
  float s = 0.0f;
  for (int32_t start = 0, g = 0; start < hd; start += kKvQ4Group, ++g) {
    const int32_t end = hd < start + kKvQ4Group ? hd : start + kKvQ4Group;
    __m256 acc = _mm256_setzero_ps();
    int32_t i = start;
    for (; i + 8 <= end; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), q4_load8(row, i), acc);
    float sg = hsum(acc);
    for (; i < end; ++i) sg += q[i] * static_cast<float>(q4_at(row, i));
    s += sg * f16(scales[g]);
  }
  return s;
}

void q4_axpy(float p, const uint8_t* row, const uint16_t* scales, int32_t hd, float* out) {
  for (int32_t start = 0, g = 0; start < hd; start += kKvQ4Group, ++g) {
    const int32_t end = hd < start + kKvQ4Group ? hd : start + kKvQ4Group;
    const float c = p * f16(scales[g]);
    const __m256 cv = _mm256_set1_ps(c);
    int32_t i = start;
    for (; i + 8 <= end; i += 8)
      _mm256_storeu_ps(out + i, _mm256_fmadd_ps(cv, q4_load8(row, i), _mm256_loadu_ps(out + i)));
    for (; i < end; ++i) out[i] += c * static_cast<float>(q4_at(row, i));
  }
}

void q4_scores(const float* q, const uint8_t* rows, const uint16_t* scales, int32_t n, int32_t hd,
               float* s) {
  const size_t row_bytes = kv_row_bytes(KvType::Q4, hd);
  const int32_t n_scales = kv_row_scales(KvType::Q4, hd);
  for (int32_t t = 0; t < n; ++t) s[t] = q4_dot(q, rows + t * row_bytes, scales + t * n_scales, hd);
}

void q4_accumulate(const float* p, const uint8_t* rows, const uint16_t* scales, int32_t n,
                   int32_t hd, float* out) {
  const size_t row_bytes = kv_row_bytes(KvType::Q4, hd);
  const int32_t n_scales = kv_row_scales(KvType::Q4, hd);
  for (int32_t t = 0; t < n; ++t) q4_axpy(p[t], rows + t * row_bytes, scales + t * n_scales, hd, out);
}

}  // namespace

// f32 keeps the scalar loops.
constexpr KvTypeKernels kKvAvx2 = {
    {}, {scores<F16Row>, accumulate<F16Row>}, {scores<Q8Row>, accumulate<Q8Row>}, {q4_scores, q4_accumulate}};

}  // namespace duet
