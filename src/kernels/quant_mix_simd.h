// The SIMD dot products of the mix types (quant_mix_kernels.h), written once
// over 256-bit vectors and an integer-dot trait Ops, and compiled by
// quant_mix_avx2.cc (Ops: maddubs + madd) and quant_mix_avx512.cc (Ops: the
// AVX-512 VNNI dpbusd / dpwssd on 256-bit registers). Include only from
// those files (they need the ISA flags).
//
// Ops::dot(acc, u, s): acc + the sums of 4 products u8 * s8 per int32 lane.
// Ops::madd(acc, a, b): acc + the sums of 2 products s16 * s16 per int32 lane.
// Byte products go through maddubs (unsigned x signed, pairs into int16),
// which saturates: every unsigned operand here is <= 127, so no pair can.
// Every block's integer sum is exact, so the results differ from the scalar
// ones only in the order the per-block floats are added.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/quant_blocks.h"
#include "kernels/quant_simd.h"

namespace duet::mix_simd {
namespace {

using quant_simd::f16;
using quant_simd::hsum;
using quant_simd::hsum256;
using quant_simd::unpack_nibbles;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Byte i = 0x10 where bit i of the little-endian word at qh is set: the
// fifth bits of a Q5_0/Q5_1 block in element order.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte i gets byte i / 8 of the word (shuffles stay in 128-bit lanes, and
  // every lane holds the word four times), then tests its bit i % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask), _mm256_set1_epi8(0x10));
}

// The 32 levels of a 16-byte IQ4 group, as signed bytes.
inline __m256i iq4_levels(const uint8_t* qs) {
  const __m256i table = _mm256_broadcastsi128_si256(load128(kIq4Levels));
  return _mm256_shuffle_epi8(table, unpack_nibbles(load128(qs)));
}

// Signed w times signed x, pairs summed into int16 lanes: |w| x (x with w's sign).
inline __m256i pairs_signed(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

// Bits 2s..2s+1 of every byte.
inline __m256i two_bits(__m256i q, int s) {
  return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * s)), _mm256_set1_epi8(3));
}

// Int16 lanes 0-7 = a, 8-15 = b: the scales of the two 16-element sub-blocks
// one 32-byte maddubs covers (its 128-bit halves).
inline __m256i two_scales16(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)), _mm_set1_epi16(static_cast<int16_t>(a)));
}

// sum_j scale16[j] * bsums[j] over a Q8_K block's 16 sums.
inline int bsum_dot(__m256i scale16, const int16_t* bsums) {
  return hsum256(_mm256_madd_epi16(scale16, load256(bsums)));
}

// nb 32-element blocks in two independent FMA chains; block(b, acc) adds
// block b into acc.
template <class Block>
inline float two_chains(int64_t nb, Block block) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    acc0 = block(b, acc0);
    acc1 = block(b + 1, acc1);
  }
  if (b < nb) acc0 = block(b, acc0);
  return hsum(_mm256_add_ps(acc0, acc1));
}

template <class Ops>
float q5_0_q8_0(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const __m256i zero = _mm256_setzero_si256(), sixteen = _mm256_set1_epi8(16);
  return two_chains(k / kQK32, [&](int64_t b, __m256 acc) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(load128(w[b].qs)), fifth_bits(w[b].qh));
    const __m256i xq = load256(x[b].qs);
    // (q - 16) * x = q*x - 16*x.
    const __m256i s = _mm256_sub_epi32(Ops::dot(zero, q, xq), Ops::dot(zero, sixteen, xq));
    return _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * f16(x[b].d)), _mm256_cvtepi32_ps(s), acc);
  });
}

template <class Ops>
float q5_1_q8_1(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  float offsets = 0.f;  // sum m * s, in block order
  const float dots = two_chains(k / kQK32, [&](int64_t b, __m256 acc) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(load128(w[b].qs)), fifth_bits(w[b].qh));
    const __m256i s = Ops::dot(_mm256_setzero_si256(), q, load256(x[b].qs));
    return _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * f16(x[b].d)), _mm256_cvtepi32_ps(s), acc);
  });
  for (int64_t b = 0; b < k / kQK32; ++b) offsets += f16(w[b].m) * f16(x[b].s);
  return dots + offsets;
}

template <class Ops>
float iq4_nl_q8_0(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ4_NL*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  return two_chains(k / kQK32, [&](int64_t b, __m256 acc) {
    const __m256i q = iq4_levels(w[b].qs);
    const __m256i s = Ops::dot(_mm256_setzero_si256(), _mm256_abs_epi8(q), _mm256_sign_epi8(load256(x[b].qs), q));
    return _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * f16(x[b].d)), _mm256_cvtepi32_ps(s), acc);
  });
}

template <class Ops>
float iq4_xs_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ4_XS*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      const __m256i p = pairs_signed(iq4_levels(w[b].qs + 16 * j), load256(x[b].qs + 32 * j));
      isum[j & 1] = Ops::madd(isum[j & 1], p, _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(w[b], j))));
    }
    sum += x[b].d * f16(w[b].d) * static_cast<float>(hsum256(_mm256_add_epi32(isum[0], isum[1])));
  }
  return sum;
}

template <class Ops>
float q2_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const uint8_t* sc = w[b].scales;
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w[b].qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        const int j = 8 * h + 2 * s;  // sub-blocks j (bytes 0-15) and j + 1
        const __m256i p = _mm256_maddubs_epi16(two_bits(q, s), load256(x[b].qs + 128 * h + 32 * s));
        isum = Ops::madd(isum, p, two_scales16(sc[j] & 0xF, sc[j + 1] & 0xF));
      }
    }
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(load128(sc), 4), _mm_set1_epi8(0x0F)));
    const float d = x[b].d * f16(w[b].d), dmin = x[b].d * f16(w[b].dmin);
    sum += d * static_cast<float>(hsum256(isum)) - dmin * static_cast<float>(bsum_dot(mins, x[b].bsums));
  }
  return sum;
}

template <class Ops>
float q3_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int8_t sc[16];
    q3_K_scales(w[b].scales, sc);
    const __m256i hmask = load256(w[b].hmask);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w[b].qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        // (q + 4h) - 4 for high bit h: the unsigned part here, the 4 * sum(x)
        // through the bsums below. Shifting 16-bit lanes by < 8 keeps each
        // byte's own bit in its bit 0.
        const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128(4 * h + s)),
                                              _mm256_set1_epi8(1));
        const __m256i v = _mm256_or_si256(two_bits(q, s), _mm256_slli_epi16(high, 2));
        const __m256i p = _mm256_maddubs_epi16(v, load256(x[b].qs + 128 * h + 32 * s));
        const int j = 8 * h + 2 * s;
        isum = Ops::madd(isum, p, two_scales16(sc[j], sc[j + 1]));
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(sc));
    const int total = hsum256(isum) - 4 * bsum_dot(sc16, x[b].bsums);
    sum += x[b].d * f16(w[b].d) * static_cast<float>(total);
  }
  return sum;
}

// sum of a Q8_K block's quants.
inline int q8_K_sum(const BlockQ8_K& x) { return bsum_dot(_mm256_set1_epi16(1), x.bsums); }

template <class Ops>
float tq2_0_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockTQ2_0*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w[b].qs + 32 * h);
      for (int s = 0; s < 4; ++s) isum = Ops::dot(isum, two_bits(q, s), load256(x[b].qs + 128 * h + 32 * s));
    }
    // (t - 1) * x = t*x - x.
    sum += x[b].d * f16(w[b].d) * static_cast<float>(hsum256(isum) - q8_K_sum(x[b]));
  }
  return sum;
}

// Trit n of each byte, with the byte's multiplier 3^n in mult: the low byte
// of byte * 3^n, times 3, shifted down 8 (in 16-bit lanes, even and odd
// bytes apart, as there is no byte multiply).
inline __m256i trits(__m256i bytes, __m256i mult) {
  const __m256i low = _mm256_set1_epi16(0xFF), three = _mm256_set1_epi16(3);
  auto one_half = [&](__m256i v, __m256i m) {
    const __m256i q = _mm256_and_si256(_mm256_mullo_epi16(v, m), low);
    return _mm256_srli_epi16(_mm256_mullo_epi16(q, three), 8);
  };
  const __m256i even = one_half(_mm256_and_si256(bytes, low), _mm256_and_si256(mult, low));
  const __m256i odd = one_half(_mm256_srli_epi16(bytes, 8), _mm256_srli_epi16(mult, 8));
  return _mm256_or_si256(even, _mm256_slli_epi16(odd, 8));
}

inline __m256i pow3_bytes(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi8(static_cast<char>(hi)), _mm_set1_epi8(static_cast<char>(lo)));
}

template <class Ops>
float tq1_0_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockTQ1_0*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  static constexpr int kPow3[5] = {1, 3, 9, 27, 81};
  // The last 32 elements: qs[32..47]'s fifth trits, then qh's 4 trits of 4 bytes.
  const __m256i last_mult = _mm256_set_m128i(_mm_setr_epi8(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27),
                                             _mm_set1_epi8(81));
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const __m256i qs = load256(w[b].qs);
    __m256i isum = _mm256_setzero_si256();
    for (int n = 0; n < 5; ++n)  // elements 32n + m: trit n of qs[m]
      isum = Ops::dot(isum, trits(qs, _mm256_set1_epi8(static_cast<char>(kPow3[n]))), load256(x[b].qs + 32 * n));
    // Elements 160 + 16n + m: trit n of qs[32 + m], two trits per vector.
    const __m256i tail = _mm256_broadcastsi128_si256(load128(w[b].qs + 32));
    isum = Ops::dot(isum, trits(tail, pow3_bytes(1, 3)), load256(x[b].qs + 160));
    isum = Ops::dot(isum, trits(tail, pow3_bytes(9, 27)), load256(x[b].qs + 192));
    uint32_t qh;
    std::memcpy(&qh, w[b].qh, 4);
    const __m256i last = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(qh)), load128(w[b].qs + 32));
    isum = Ops::dot(isum, trits(last, last_mult), load256(x[b].qs + 224));
    sum += x[b].d * f16(w[b].d) * static_cast<float>(hsum256(isum) - q8_K_sum(x[b]));
  }
  return sum;
}

}  // namespace
}  // namespace duet::mix_simd

// The level's entry points (quant_mix_kernels.h), over its Ops.
#define DUET_MIX_DEFINE_DOTS(Ops)                                                                           \
  float vec_dot_q5_0_q8_0(int64_t k, const void* w, const void* x) { return mix_simd::q5_0_q8_0<Ops>(k, w, x); } \
  float vec_dot_q5_1_q8_1(int64_t k, const void* w, const void* x) { return mix_simd::q5_1_q8_1<Ops>(k, w, x); } \
  float vec_dot_iq4_nl_q8_0(int64_t k, const void* w, const void* x) {                                    \
    return mix_simd::iq4_nl_q8_0<Ops>(k, w, x);                                                            \
  }                                                                                                         \
  float vec_dot_q2_K_q8_K(int64_t k, const void* w, const void* x) { return mix_simd::q2_K_q8_K<Ops>(k, w, x); } \
  float vec_dot_q3_K_q8_K(int64_t k, const void* w, const void* x) { return mix_simd::q3_K_q8_K<Ops>(k, w, x); } \
  float vec_dot_iq4_xs_q8_K(int64_t k, const void* w, const void* x) {                                    \
    return mix_simd::iq4_xs_q8_K<Ops>(k, w, x);                                                            \
  }                                                                                                         \
  float vec_dot_tq1_0_q8_K(int64_t k, const void* w, const void* x) { return mix_simd::tq1_0_q8_K<Ops>(k, w, x); } \
  float vec_dot_tq2_0_q8_K(int64_t k, const void* w, const void* x) { return mix_simd::tq2_0_q8_K<Ops>(k, w, x); }
