// Small helpers shared by the AVX2 and AVX-512 quantized kernels. Include
// only from *_avx2.cc / *_avx512.cc files (they need the ISA flags). The
// anonymous namespace gives each file its own copy: an inline function with
// external linkage could be resolved to the AVX-512 build of it everywhere.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/vec.h"

namespace duet::quant_simd {
namespace {

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

using vec::hsum;

inline int hsum(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

// The f16 field at `first` and at the same place in the next 7 blocks of
// type Block, as floats.
template <class Block>
inline __m256 scales8(const uint16_t* first) {
  const auto* p = reinterpret_cast<const uint8_t*>(first);
  auto at = [&](int i) {
    uint16_t h;
    std::memcpy(&h, p + i * sizeof(Block), 2);
    return static_cast<short>(h);
  };
  return _mm256_cvtph_ps(_mm_setr_epi16(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)));
}

// Lane i of v in all lanes.
inline __m256 lane(__m256 v, int i) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i)); }

inline int hsum256(__m256i v) {
  return hsum(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// 16 bytes of packed nibbles -> 32 bytes: the low nibbles, then the high ones
// (element order of Q4_0/Q4_1 blocks and of each Q4_K 64-element chunk half).
inline __m256i unpack_nibbles(__m128i q) {
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// The 8 six-bit scales and the 8 mins of a Q4_K/Q5_K block, one per byte.
inline void k4_unpack(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  const uint32_t sc_lo = u[0] & 0x3f3f3f3f, m_lo = u[1] & 0x3f3f3f3f;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0f) | ((u[0] >> 2) & 0x30303030);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 2) & 0x30303030);
  *scales = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *mins = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// sum_j mins[j] * (bsums[2j] + bsums[2j+1]) for the 8 sub-blocks of 32.
inline int k4_min_sum(uint64_t mins, const int16_t* bsums) {
  const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums));
  const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums + 8));
  const __m128i pairs = _mm_hadd_epi16(b0, b1);  // |pair| <= 32*127: no overflow
  const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)));
  return hsum(_mm_madd_epi16(pairs, m16));
}

// sum_j scales[j] * bsums[j] over the 16 sub-blocks of a Q6_K block.
inline int q6_offset_sum(const int8_t* scales, const int16_t* bsums) {
  const __m256i s16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
  return hsum256(_mm256_madd_epi16(s16, b));
}

}  // namespace
}  // namespace duet::quant_simd
