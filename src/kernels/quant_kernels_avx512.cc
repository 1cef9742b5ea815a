// AVX-512 VNNI kernels of the quantized types. vpdpbusd multiplies unsigned
// by signed bytes and adds groups of four into int32 lanes; signed x signed
// (Q8_0) takes |w| and moves w's sign onto x, which is exact because
// activations never hold -128. The 4-bit weights are unsigned already; Q4_0's
// offset of 8 comes off as 8 * sum(x). The K-quants use 512-bit vectors: one
// 64-element chunk per vector, maddubs into int16 pairs, then vpdpwssd
// multiplies by the 16-bit sub-block scales and accumulates in int32.
// Float results agree with quant_scalar up to rounding, like the AVX2 ones.
#include <immintrin.h>

#include "core/quant_blocks.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_simd.h"

#include "kernels/avx512_quiet.h"

namespace duet::quant_avx512 {
namespace {

using namespace quant_simd;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// sum over 32 bytes of w*x (w any int8, x in [-127, 127]) as 8 int32 lanes.
inline __m256i dot_i8(__m256i w, __m256i x) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

// 32 int16 lanes: bytes a (lanes 0-15) and b (16-31) widened.
inline __m512i halves16(uint8_t a, uint8_t b) {
  return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_set1_epi8(static_cast<char>(b)),
                                               _mm_set1_epi8(static_cast<char>(a))));
}

// 32 int16 lanes: a, a+1, a+2, a+3, each repeated 8 times.
inline __m512i quarters16(uint8_t a) {
  const int64_t rep = 0x0101010101010101LL;
  return _mm512_cvtepu8_epi16(_mm256_setr_epi64x(a * rep, (a + 1) * rep, (a + 2) * rep, (a + 3) * rep));
}

// Two blocks' 32 bytes in one vector.
inline __m512i pair512(const int8_t* a, const int8_t* b) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(load256(a)), load256(b), 1);
}

// Two Q4_0/Q4_1 blocks' 16 nibble bytes as 64 quants: a's low nibbles, a's
// high nibbles, then b's.
inline __m512i nibble_pair512(const uint8_t* a, const uint8_t* b) {
  const __m512i twice = _mm512_inserti64x4(
      _mm512_zextsi256_si512(_mm256_broadcastsi128_si256(load128(a))),
      _mm256_broadcastsi128_si256(load128(b)), 1);
  const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                           0x0004000400040004LL, 0x0004000400040004LL);
  return _mm512_and_si512(_mm512_srlv_epi16(twice, shifts), _mm512_set1_epi8(0x0F));
}

// Lane indices putting lane i of a vector in lanes 0-7 and lane i+1 in 8-15.
inline __m512i pair_lanes(int i) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_set1_epi32(i)), _mm256_set1_epi32(i + 1), 1);
}

// The 64 4-bit quants of a 32-byte run: low nibbles, then high nibbles.
inline __m512i nibbles64(__m256i qs) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  return _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_and_si256(qs, low4)),
                            _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4), 1);
}

}  // namespace

// The 32-element types run 8 blocks at a time: their 16 f16 scales are
// converted and multiplied as vectors, and each block's int32 lane sums meet
// their scale in one multiply-add. One weight row per call: rows read side by
// side interleave their streams within the same 4 KiB pages, which this
// machine's hardware prefetchers do not follow (2 or 4 rows per call, sharing
// the activation loads, streamed from DRAM at half the speed of one row).
namespace {

// The f16 scales of 8 consecutive Q4_0 blocks (18 bytes each): all lie in
// the first 128 bytes, so two 512-bit loads and a word permute gather them.
inline __m256 q4_0_scales8(const BlockQ4_0* w) {
  const __m512i idx = _mm512_zextsi128_si512(_mm_setr_epi16(0, 9, 18, 27, 36, 45, 54, 63));
  const auto* p = reinterpret_cast<const uint8_t*>(w);
  return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(load512(p), idx, load512(p + 64))));
}

inline float finish(const __m512* acc, __m256 tail) {
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]))) +
         hsum(tail);
}

// Q8_0 and Q4_0 weights as unsigned bytes: their offset (which, times
// sum(x), starts each int32 sum, negated: integer sums, so exactly as
// subtracting), 8 blocks' scales, two blocks' quants in one vector, and one
// block's exact dot for the tail.
struct Q8Unsigned {
  using Block = BlockQ8_0;
  // There is no 512-bit sign-byte op, so w goes unsigned as w + 128 (xor 0x80).
  static constexpr char kOffset = static_cast<char>(0x80);
  static __m256 scales8(const Block* w) { return quant_simd::scales8<Block>(&w->d); }
  static __m512i pair(const Block& a, const Block& b) {
    return _mm512_xor_si512(pair512(a.qs, b.qs), _mm512_set1_epi8(kOffset));
  }
  static __m256i dot(const Block& w, const BlockQ8_0& x) { return dot_i8(load256(w.qs), load256(x.qs)); }
};

struct Q4Unsigned {
  using Block = BlockQ4_0;
  static constexpr char kOffset = 8;
  static __m256 scales8(const Block* w) { return q4_0_scales8(w); }
  static __m512i pair(const Block& a, const Block& b) { return nibble_pair512(a.qs, b.qs); }
  static __m256i dot(const Block& w, const BlockQ8_0& x) {
    const __m256i q = unpack_nibbles(load128(w.qs));
    const __m256i xq = load256(x.qs);
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, xq),
                            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), xq));
  }
};

// Two blocks per 512-bit vector, 8 blocks' scales at a time.
template <class W>
float q8_act_dot(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const typename W::Block*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  const int64_t nb = k / kQK32;
  const __m512i offset = _mm512_set1_epi8(W::kOffset), zero = _mm512_setzero_si512();
  // One accumulator per pair of the 8-block step: independent FMA chains.
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const __m256 d = _mm256_mul_ps(W::scales8(w + b), scales8<BlockQ8_0>(&x[b].d));
    const __m512 d2 = _mm512_castps256_ps512(d);
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
      const __m512i xq = pair512(x[b + i].qs, x[b + i + 1].qs);
      const __m512i off = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, offset, xq));
      const __m512i s = _mm512_dpbusd_epi32(off, W::pair(w[b + i], w[b + i + 1]), xq);
      acc[i / 2] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pair_lanes(i), d2), _mm512_cvtepi32_ps(s), acc[i / 2]);
    }
  }
  __m256 tail = _mm256_setzero_ps();
  for (; b < nb; ++b)
    tail = _mm256_fmadd_ps(_mm256_set1_ps(f16(w[b].d) * f16(x[b].d)), _mm256_cvtepi32_ps(W::dot(w[b], x[b])), tail);
  return finish(acc, tail);
}

}  // namespace

float vec_dot_q8_0_q8_0(int64_t k, const void* vw, const void* vx) { return q8_act_dot<Q8Unsigned>(k, vw, vx); }

float vec_dot_q4_0_q8_0(int64_t k, const void* vw, const void* vx) { return q8_act_dot<Q4Unsigned>(k, vw, vx); }

float vec_dot_q4_1_q8_1(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  const int64_t nb = k / kQK32;
  auto block = [&](int64_t i) {
    const __m256i q = unpack_nibbles(load128(w[i].qs));
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load256(x[i].qs));
  };
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 offsets = _mm256_setzero_ps();  // sum m * s, one block per lane
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const __m256 d = _mm256_mul_ps(scales8<BlockQ4_1>(&w[b].d), scales8<BlockQ8_1>(&x[b].d));
    offsets = _mm256_fmadd_ps(scales8<BlockQ4_1>(&w[b].m), scales8<BlockQ8_1>(&x[b].s), offsets);
    for (int i = 0; i < 8; ++i)
      acc[i & 1] = _mm256_fmadd_ps(lane(d, i), _mm256_cvtepi32_ps(block(b + i)), acc[i & 1]);
  }
  float tail_offsets = 0.f;
  for (; b < nb; ++b) {
    const __m256 d = _mm256_set1_ps(f16(w[b].d) * f16(x[b].d));
    acc[0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block(b)), acc[0]);
    tail_offsets += f16(w[b].m) * f16(x[b].s);
  }
  return hsum(_mm256_add_ps(acc[0], acc[1])) + hsum(offsets) + tail_offsets;
}

namespace {

// Q4_K and Q5_K: quants(block, c, pick) gives the 64 unsigned quants of chunk
// c, where pick holds the shift counts 2c (first 32 elements) and 2c + 1.
template <class Block, class Quants>
float k4_dot(int64_t k, const void* vw, const void* vx, Quants quants) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  // Chunk c (64 elements) uses sub-block scales 2c (first 32) and 2c+1.
  const __m512i pick[4] = {halves16(0, 1), halves16(2, 3), halves16(4, 5), halves16(6, 7)};
  __m512 acc = _mm512_setzero_ps();  // per-lane sums of d * isum
  float mins_total = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    uint64_t scales, mins;
    k4_unpack(w[b].scales, &scales, &mins);
    const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales))));
    __m512i isum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // two dpwssd chains
    for (int c = 0; c < 4; ++c) {
      const __m512i p = _mm512_maddubs_epi16(quants(w[b], c, pick[c]), load512(x[b].qs + 64 * c));
      isum[c & 1] = _mm512_dpwssd_epi32(isum[c & 1], p, _mm512_permutexvar_epi16(pick[c], sc16));
    }
    const float d = x[b].d * f16(w[b].d);
    const float dmin = x[b].d * f16(w[b].dmin);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(isum[0], isum[1])), acc);
    mins_total += dmin * static_cast<float>(k4_min_sum(mins, x[b].bsums));
  }
  return _mm512_reduce_add_ps(acc) - mins_total;
}

}  // namespace

float vec_dot_q4_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return k4_dot<BlockQ4_K>(k, vw, vx,
                           [](const BlockQ4_K& w, int c, __m512i) { return nibbles64(load256(w.qs + 32 * c)); });
}

float vec_dot_q5_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return k4_dot<BlockQ5_K>(k, vw, vx, [](const BlockQ5_K& w, int c, __m512i pick) {
    // Fifth bits: bit 2c of qh for the first 32 elements, 2c+1 for the
    // next; shift each to bit 0 of its byte, then to bit 4.
    const __m512i qh = _mm512_broadcast_i64x4(load256(w.qh));
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(qh, pick), 4), _mm512_set1_epi8(0x10));
    return _mm512_or_si512(nibbles64(load256(w.qs + 32 * c)), h);
  });
}

float vec_dot_q6_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  // Per 128-element half: vector A holds elements 0-63, B 64-127. Their
  // high 2 bits sit in qh at bits 0-1 / 2-3 (A) and 4-5 / 6-7 (B); these
  // per-half shift counts bring them to bits 4-5.
  const __m512i shl_a = halves16(4, 2), shr_b = halves16(0, 2);
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  // Sub-block scales of A and B in each half: 8h..8h+3 and 8h+4..8h+7.
  const __m512i pick[2][2] = {{quarters16(0), quarters16(4)}, {quarters16(8), quarters16(12)}};
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const __m512i sc16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(load128(w[b].scales)));
    __m512i isum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // two dpwssd chains
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load512(w[b].ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load256(w[b].qh + 32 * h));
      const __m512i a = _mm512_or_si512(_mm512_and_si512(ql, low4),
                                        _mm512_and_si512(_mm512_sllv_epi16(qh, shl_a), bits45));
      const __m512i bq = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, shr_b), bits45));
      const __m512i pa = _mm512_maddubs_epi16(a, load512(x[b].qs + 128 * h));
      const __m512i pb = _mm512_maddubs_epi16(bq, load512(x[b].qs + 128 * h + 64));
      isum[0] = _mm512_dpwssd_epi32(isum[0], pa, _mm512_permutexvar_epi16(pick[h][0], sc16));
      isum[1] = _mm512_dpwssd_epi32(isum[1], pb, _mm512_permutexvar_epi16(pick[h][1], sc16));
    }
    // q6 - 32: subtract 32 * sum_j scale_j * bsum_j.
    const int total = _mm512_reduce_add_epi32(_mm512_add_epi32(isum[0], isum[1])) -
                      32 * q6_offset_sum(w[b].scales, x[b].bsums);
    sum += (f16(w[b].d) * x[b].d) * static_cast<float>(total);
  }
  return sum;
}

}  // namespace duet::quant_avx512
