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

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/quant_blocks.h"
#include "kernels/quant_mix_kernels.h"
#include "kernels/quant_simd.h"

namespace duet::mix_simd {
namespace {

using quant_simd::f16;
using quant_simd::hsum;
using quant_simd::hsum256;
using quant_simd::unpack_nibbles;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Byte i = 0xFF where bit i of the little-endian word at p is set, else 0.
inline __m256i bit_bytes(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  // Byte i gets byte i / 8 of the word (shuffles stay in 128-bit lanes, and
  // every lane holds the word four times), then tests its bit i % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
}

// Byte i = 0x10 where bit i of the word at qh is set: the fifth bits of a
// Q5_0/Q5_1 block in element order.
inline __m256i fifth_bits(const uint8_t* qh) { return _mm256_and_si256(bit_bytes(qh), _mm256_set1_epi8(0x10)); }

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

// From the 16 sub-block scales as int16 (sc16), the pair one 32-byte maddubs
// covers: int16 lanes 0-7 = sc16[2i], 8-15 = sc16[2i + 1] (its 128-bit
// halves). 32-bit word i holds both; broadcast it, then pick a half-word per
// lane, all in vector registers.
inline __m256i scale_pair(__m256i sc16, int i) {
  const __m256i word = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(i));
  const __m256i pick = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return _mm256_shuffle_epi8(word, pick);
}

// sum_j scale16[j] * bsums[j] over a Q8_K block's 16 sums.
inline int bsum_dot(__m256i scale16, const int16_t* bsums) {
  return hsum256(_mm256_madd_epi16(scale16, load256(bsums)));
}

// ---- Weight kinds -------------------------------------------------------------
//
// Each kind decodes one weight block (decode), once for every token that
// meets it, and takes its dot with one activation block (dot: exact integers
// times the block's scales). rows<> below runs them over a row and up to
// kToks tokens; the single-token dot product is the same code with one token,
// so a token gets the same bits in decode as in a batch.

// The 32-element kinds: dot gives int32 lanes, which meet d_w * d_x in an
// FMA; extra (Q5_1's m * s) is summed apart, in block order.
struct Q5_0Kind {
  static constexpr int64_t kBlock = kQK32;
  using W = BlockQ5_0;
  using X = BlockQ8_0;
  struct Decoded {
    __m256i q;  // levels 0..31
    float d;
  };
  static Decoded decode(const W& w) {
    return {_mm256_or_si256(unpack_nibbles(load128(w.qs)), fifth_bits(w.qh)), f16(w.d)};
  }
  template <class Ops>
  static __m256i dot(const Decoded& w, const X& x) {
    const __m256i xq = load256(x.qs), zero = _mm256_setzero_si256();
    // (q - 16) * x = q*x - 16*x.
    return _mm256_sub_epi32(Ops::dot(zero, w.q, xq), Ops::dot(zero, _mm256_set1_epi8(16), xq));
  }
  static float extra(const W&, const X&) { return 0.f; }
};

struct Q5_1Kind {
  static constexpr int64_t kBlock = kQK32;
  using W = BlockQ5_1;
  using X = BlockQ8_1;
  using Decoded = Q5_0Kind::Decoded;
  static Decoded decode(const W& w) {
    return {_mm256_or_si256(unpack_nibbles(load128(w.qs)), fifth_bits(w.qh)), f16(w.d)};
  }
  template <class Ops>
  static __m256i dot(const Decoded& w, const X& x) {
    return Ops::dot(_mm256_setzero_si256(), w.q, load256(x.qs));
  }
  // sum (q*d + m) * xq * dx = d*dx*isum + m * s, where s = dx * sum(xq).
  static float extra(const W& w, const X& x) { return f16(w.m) * f16(x.s); }
};

struct IQ4_NLKind {
  static constexpr int64_t kBlock = kQK32;
  using W = BlockIQ4_NL;
  using X = BlockQ8_0;
  struct Decoded {
    __m256i q;  // signed levels
    float d;
  };
  static Decoded decode(const W& w) { return {iq4_levels(w.qs), f16(w.d)}; }
  template <class Ops>
  static __m256i dot(const Decoded& w, const X& x) {
    return Ops::dot(_mm256_setzero_si256(), _mm256_abs_epi8(w.q), _mm256_sign_epi8(load256(x.qs), w.q));
  }
  static float extra(const W&, const X&) { return 0.f; }
};

// The 256-element kinds: dot gives the block's float contribution.
struct IQ4_XSKind {
  static constexpr int64_t kBlock = kQKK;
  using W = BlockIQ4_XS;
  struct Decoded {
    __m256i q[8];  // signed levels of the 8 sub-blocks
    int16_t scale[8];
    float d;
  };
  static Decoded decode(const W& w) {
    Decoded r;
    for (int j = 0; j < 8; ++j) {
      r.q[j] = iq4_levels(w.qs + 16 * j);
      r.scale[j] = static_cast<int16_t>(iq4_xs_scale(w, j));
    }
    r.d = f16(w.d);
    return r;
  }
  template <class Ops>
  static float dot(const Decoded& w, const BlockQ8_K& x) {
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j)
      isum[j & 1] = Ops::madd(isum[j & 1], pairs_signed(w.q[j], load256(x.qs + 32 * j)), _mm256_set1_epi16(w.scale[j]));
    return x.d * w.d * static_cast<float>(hsum256(_mm256_add_epi32(isum[0], isum[1])));
  }
};

struct Q2_KKind {
  static constexpr int64_t kBlock = kQKK;
  using W = BlockQ2_K;
  struct Decoded {
    __m256i q[8];      // q[4h + s]: the levels of elements 128h + 32s .. + 31
    __m256i scale[8];  // scale_pair i of the 16 scales
    __m256i mins;      // 16 int16
    float d, dmin;
  };
  static Decoded decode(const W& w) {
    Decoded r;
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w.qs + 32 * h);
      for (int s = 0; s < 4; ++s) r.q[4 * h + s] = two_bits(q, s);
    }
    const __m128i sc = load128(w.scales);
    r.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0F)));
    for (int i = 0; i < 8; ++i) r.scale[i] = scale_pair(sc16, i);
    r.d = f16(w.d);
    r.dmin = f16(w.dmin);
    return r;
  }
  template <class Ops>
  static float dot(const Decoded& w, const BlockQ8_K& x) {
    __m256i isum = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i) {  // sub-blocks 2i (bytes 0-15) and 2i + 1
      const __m256i p = _mm256_maddubs_epi16(w.q[i], load256(x.qs + 32 * i));
      isum = Ops::madd(isum, p, w.scale[i]);
    }
    return x.d * w.d * static_cast<float>(hsum256(isum)) -
           x.d * w.dmin * static_cast<float>(bsum_dot(w.mins, x.bsums));
  }
};

// The 16 signed scales of a Q3_K block as bytes (q3_K_scales in
// core/quant_blocks.h, vectorized): low nibbles of bytes 0-7 then their high
// nibbles; the high 2 bits of scale j from byte 8 + j % 4 at bit 2 * (j / 4),
// i.e. the word of bytes 8-11 shifted by 0, 2, 4, 6 per group of four.
inline __m128i q3_K_scales16(const uint8_t* packed) {
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(lo, low4), _mm_and_si128(_mm_srli_epi16(lo, 4), low4));
  uint32_t h;
  std::memcpy(&h, packed + 8, 4);
  const __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(h)), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
}

struct Q3_KKind {
  static constexpr int64_t kBlock = kQKK;
  using W = BlockQ3_K;
  struct Decoded {
    __m256i q[8];      // (level + 4 * high bit), 0..7, in Q2_K's order
    __m256i scale[8];  // scale_pair i of the 16 signed scales
    __m256i sc16;      // the 16 signed scales as int16
    float d;
  };
  static Decoded decode(const W& w) {
    Decoded r;
    r.sc16 = _mm256_cvtepi8_epi16(q3_K_scales16(w.scales));
    for (int i = 0; i < 8; ++i) r.scale[i] = scale_pair(r.sc16, i);
    const __m256i hmask = load256(w.hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w.qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        // Shifting 16-bit lanes by < 8 keeps each byte's own bit in its bit 0.
        const __m256i high =
            _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128(4 * h + s)), _mm256_set1_epi8(1));
        r.q[4 * h + s] = _mm256_or_si256(two_bits(q, s), _mm256_slli_epi16(high, 2));
      }
    }
    r.d = f16(w.d);
    return r;
  }
  // (level + 4h) - 4: the unsigned part in the byte dots, the 4 * sum(x)
  // through the activations' sums.
  template <class Ops>
  static float dot(const Decoded& w, const BlockQ8_K& x) {
    __m256i isum = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i) {
      const __m256i p = _mm256_maddubs_epi16(w.q[i], load256(x.qs + 32 * i));
      isum = Ops::madd(isum, p, w.scale[i]);
    }
    const int total = hsum256(isum) - 4 * bsum_dot(w.sc16, x.bsums);
    return x.d * w.d * static_cast<float>(total);
  }
};

// IQ3_S (quant_iq3.cc): each sub-block's 8 grid points gathered by their
// 9-bit indices (qs byte, qh bit), 32 magnitudes 1..15 in element order,
// with their signs' bits as a byte mask; a sub-block's sum is one maddubs
// of the magnitudes with x signed by the mask, then one madd by its factor
// 1 + 2s. A batch (dot_rows, after prepare) decodes 4 rows at a time and
// takes each token's quants once for them: as x + 128 (x ^ 0x80, unsigned)
// against the signed weights w in [-15, 15] (pairs <= 2 * 255 * 15, no
// saturation), the block's 128 * sum_j(factor_j * sum(w_j)) coming off
// once, or at AVX-512 widened to int16 against w times the factor. Sums
// made once a row, which one token would pay every block. Exact integers
// per block, as the scalar dot's, either way.
struct IQ3_SKind {
  static constexpr int64_t kBlock = kQKK;
  using W = BlockIQ3_S;
  struct Decoded {
    __m256i mag[8];       // sub-block j's magnitudes
    __m256i negative[8];  // 0xFF where its element is negative
    __m256i factor[8];    // its factor, in every int16 lane
#ifdef __AVX512BW__
    __m512i wf[8];  // its signed weights times its factor, int16 (|.| <= 465), by prepare
#else
    __m256i w[8];  // its signed weights, by prepare
    int offset;    // 128 * sum_j factor_j * sum(w_j), by prepare
#endif
    float d;
  };
  static Decoded decode(const W& w) {
    Decoded r;
    const __m256i bit = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
    const auto* grid = reinterpret_cast<const int*>(kIq3sGrid.data());
    for (int j = 0; j < 8; ++j) {
      const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.qs + 8 * j)));
      const __m256i high = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w.qh[j]), bit), one);
      r.mag[j] = _mm256_i32gather_epi32(grid, _mm256_or_si256(low, _mm256_slli_epi32(high, 8)), 4);
      r.negative[j] = bit_bytes(w.signs + 4 * j);
      r.factor[j] = _mm256_set1_epi16(static_cast<int16_t>(1 + 2 * ((w.scales[j / 2] >> (4 * (j % 2))) & 0xF)));
    }
    r.d = f16(w.d);
    return r;
  }
  static void prepare(Decoded& w) {
#ifndef __AVX512BW__
    __m256i sums = _mm256_setzero_si256();
#endif
    for (int j = 0; j < 8; ++j) {
      const __m256i signed_w = _mm256_sub_epi8(_mm256_xor_si256(w.mag[j], w.negative[j]), w.negative[j]);
#ifdef __AVX512BW__
      w.wf[j] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(signed_w), _mm512_broadcastw_epi16(_mm256_castsi256_si128(w.factor[j])));
#else
      w.w[j] = signed_w;
      sums = _mm256_add_epi32(sums, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), signed_w), w.factor[j]));
#endif
    }
#ifndef __AVX512BW__
    w.offset = 128 * hsum256(sums);
#endif
  }
  template <class Ops>
  static float dot(const Decoded& w, const BlockQ8_K& x) {
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      const __m256i xs = _mm256_sub_epi8(_mm256_xor_si256(load256(x.qs + 32 * j), w.negative[j]), w.negative[j]);
      isum[j & 1] = Ops::madd(isum[j & 1], _mm256_maddubs_epi16(w.mag[j], xs), w.factor[j]);
    }
    return x.d * w.d * static_cast<float>(hsum256(_mm256_add_epi32(isum[0], isum[1])));
  }
  // A batch: R rows' block b (prepared) against one token's block, each
  // of its quant vectors meeting the R rows: out[r] = row r's contribution.
  // AVX-512: a sub-block is one vpdpwssd of its 32 quants widened to int16
  // against the weights times the factor (products <= 127 * 465); AVX2:
  // one maddubs of x + 128 against the signed weights and one madd by the
  // factor, the offset taken off the block's sum.
  template <class Ops, int R>
  static void dot_rows(const Decoded* const (&rows)[R], int64_t b, const BlockQ8_K& x, float (&out)[R]) {
#ifdef __AVX512BW__
    __m512i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const __m512i x16 = _mm512_cvtepi8_epi16(load256(x.qs + 32 * j));
      for (int r = 0; r < R; ++r) acc[r] = _mm512_dpwssd_epi32(acc[r], x16, rows[r][b].wf[j]);
    }
    for (int r = 0; r < R; ++r) out[r] = x.d * rows[r][b].d * static_cast<float>(_mm512_reduce_add_epi32(acc[r]));
#else
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i xu = _mm256_xor_si256(load256(x.qs + 32 * j), flip);
      for (int r = 0; r < R; ++r)
        acc[r] = Ops::madd(acc[r], _mm256_maddubs_epi16(xu, rows[r][b].w[j]), rows[r][b].factor[j]);
    }
    for (int r = 0; r < R; ++r)
      out[r] = x.d * rows[r][b].d * static_cast<float>(hsum256(acc[r]) - rows[r][b].offset);
#endif
  }
};

// sum of a Q8_K block's quants.
inline int q8_K_sum(const BlockQ8_K& x) { return bsum_dot(_mm256_set1_epi16(1), x.bsums); }

// The ternary kinds: trits t in 0..2 in element order, 32 per vector;
// (t - 1) * x = t*x - x.
struct Trits {
  __m256i t[8];
  float d;
};

template <class Ops>
inline float ternary_dot(const Trits& w, const BlockQ8_K& x) {
  __m256i isum = _mm256_setzero_si256();
  for (int i = 0; i < 8; ++i) isum = Ops::dot(isum, w.t[i], load256(x.qs + 32 * i));
  return x.d * w.d * static_cast<float>(hsum256(isum) - q8_K_sum(x));
}

struct TQ2_0Kind {
  static constexpr int64_t kBlock = kQKK;
  using W = BlockTQ2_0;
  using Decoded = Trits;
  static Decoded decode(const W& w) {
    Decoded r;
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w.qs + 32 * h);
      for (int s = 0; s < 4; ++s) r.t[4 * h + s] = two_bits(q, s);
    }
    r.d = f16(w.d);
    return r;
  }
  template <class Ops>
  static float dot(const Decoded& w, const BlockQ8_K& x) {
    return ternary_dot<Ops>(w, x);
  }
};

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

struct TQ1_0Kind {
  static constexpr int64_t kBlock = kQKK;
  using W = BlockTQ1_0;
  using Decoded = Trits;
  static Decoded decode(const W& w) {
    static constexpr int kPow3[5] = {1, 3, 9, 27, 81};
    Decoded r;
    const __m256i qs = load256(w.qs);
    for (int n = 0; n < 5; ++n)  // elements 32n + m: trit n of qs[m]
      r.t[n] = trits(qs, _mm256_set1_epi8(static_cast<char>(kPow3[n])));
    // Elements 160 + 16n + m: trit n of qs[32 + m], two trits per vector.
    const __m256i tail = _mm256_broadcastsi128_si256(load128(w.qs + 32));
    r.t[5] = trits(tail, pow3_bytes(1, 3));
    r.t[6] = trits(tail, pow3_bytes(9, 27));
    // The last 32: qs[32..47]'s fifth trits, then qh's 4 trits of 4 bytes.
    uint32_t qh;
    std::memcpy(&qh, w.qh, 4);
    const __m256i last = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(qh)), load128(w.qs + 32));
    const __m256i last_mult =
        _mm256_set_m128i(_mm_setr_epi8(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27), _mm_set1_epi8(81));
    r.t[7] = trits(last, last_mult);
    r.d = f16(w.d);
    return r;
  }
  template <class Ops>
  static float dot(const Decoded& w, const BlockQ8_K& x) {
    return ternary_dot<Ops>(w, x);
  }
};

// ---- Rows and tokens -------------------------------------------------------------

constexpr int kToks = 4;  // tokens per pass over a weight row

// y[t * ys] = dot(weight row w, token t's activations at x + t * xs) for
// T tokens, over nb 32-element blocks in two FMA chains (even and odd
// blocks) per token.
template <class Ops, class Kind, int T>
void row32(int64_t nb, const uint8_t* w_row, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  using X = typename Kind::X;
  const auto* w = reinterpret_cast<const typename Kind::W*>(w_row);
  __m256 acc[T][2];
  float extra[T];
  for (int t = 0; t < T; ++t) {
    acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    extra[t] = 0.f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const typename Kind::Decoded dw = Kind::decode(w[b]);
    for (int t = 0; t < T; ++t) {
      const X& xb = reinterpret_cast<const X*>(x + t * xs)[b];
      const __m256i s = Kind::template dot<Ops>(dw, xb);
      acc[t][b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dw.d * f16(xb.d)), _mm256_cvtepi32_ps(s), acc[t][b & 1]);
      extra[t] += Kind::extra(w[b], xb);
    }
  }
  for (int t = 0; t < T; ++t) y[t * ys] = hsum(_mm256_add_ps(acc[t][0], acc[t][1])) + extra[t];
}

// As row32, over 256-element blocks, their contributions added in block order.
template <class Ops, class Kind, int T>
void row256(int64_t nb, const uint8_t* w_row, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  const auto* w = reinterpret_cast<const typename Kind::W*>(w_row);
  float sum[T] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const typename Kind::Decoded dw = Kind::decode(w[b]);
    for (int t = 0; t < T; ++t)
      sum[t] += Kind::template dot<Ops>(dw, reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b]);
  }
  for (int t = 0; t < T; ++t) y[t * ys] = sum[t];
}

template <class Ops, class Kind, int T>
void row(int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  if constexpr (Kind::kBlock == kQK32)
    row32<Ops, Kind, T>(k / kQK32, w, x, xs, y, ys);
  else
    row256<Ops, Kind, T>(k / kQKK, w, x, xs, y, ys);
}

template <class Ops, class Kind>
float vec_dot(int64_t k, const void* w, const void* x) {
  float y;
  row<Ops, Kind, 1>(k, static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(x), 0, &y, 0);
  return y;
}

// Rows a batch decodes together (256-element kinds).
constexpr int kRowTile = 4;

// R rows' block b against one token's block: the kind's multi-row dot
// (IQ3_S: each quant vector meets the R rows), or its dot row by row.
template <class Ops, class Kind, int R>
void rows_dot(const typename Kind::Decoded* const (&rows)[R], int64_t b, const BlockQ8_K& x, float (&out)[R]) {
  if constexpr (requires { Kind::template dot_rows<Ops, R>; })
    Kind::template dot_rows<Ops, R>(rows, b, x, out);
  else
    for (int r = 0; r < R; ++r) out[r] = Kind::template dot<Ops>(rows[r][b], x);
}

// R rows (decoded) against every token: per (row, token) the blocks'
// contributions summed in block order, as row256's.
template <class Ops, class Kind, int R>
void row_tile(int64_t nb, const typename Kind::Decoded* const (&rows)[R], const uint8_t* x, size_t xs,
              int64_t n_tok, float* y, int64_t ys) {
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* xt = reinterpret_cast<const BlockQ8_K*>(x + t * xs);
    float sum[R] = {};
    for (int64_t b = 0; b < nb; ++b) {
      float part[R];
      rows_dot<Ops, Kind, R>(rows, b, xt[b], part);
      for (int r = 0; r < R; ++r) sum[r] += part[r];
    }
    for (int r = 0; r < R; ++r) y[t * ys + r] = sum[r];
  }
}

// dot_block's batch path for the 256-element kinds: kRowTile rows decoded
// (and prepared, where the kind's multi-row dot wants it) at a time, once
// for all the tokens.
template <class Ops, class Kind>
void decoded_row_tiles(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x,
                       size_t x_stride, int64_t n_tok, float* y, int64_t y_stride) {
  using Decoded = typename Kind::Decoded;
  thread_local std::vector<Decoded> blocks;
  const int64_t nb = k / kQKK;
  blocks.resize(static_cast<size_t>(kRowTile * nb));
  for (int64_t r0 = 0; r0 < n_rows; r0 += kRowTile) {
    const int64_t nr = n_rows - r0 < kRowTile ? n_rows - r0 : kRowTile;
    for (int64_t r = 0; r < nr; ++r) {
      const auto* wr = reinterpret_cast<const typename Kind::W*>(w + (r0 + r) * w_stride);
      for (int64_t b = 0; b < nb; ++b) {
        Decoded& d = blocks[static_cast<size_t>(r * nb + b)];
        d = Kind::decode(wr[b]);
        if constexpr (requires { Kind::prepare; }) Kind::prepare(d);
      }
    }
    const auto run = [&]<int R>() {
      const Decoded* rows[R];
      for (int r = 0; r < R; ++r) rows[r] = blocks.data() + r * nb;
      row_tile<Ops, Kind, R>(nb, rows, x, x_stride, n_tok, y + r0, y_stride);
    };
    switch (nr) {
      case 1: run.template operator()<1>(); break;
      case 2: run.template operator()<2>(); break;
      case 3: run.template operator()<3>(); break;
      default: run.template operator()<4>(); break;
    }
  }
}

// A TypeKernels::dot_block: a row at a time (the weights one linear stream),
// each decoded block meeting up to kToks tokens. For longer batches the
// 256-element kinds decode each row once for all its tokens
// (decoded_row_tiles): IQ3_S's lookups cost more than its dots, and
// decoding per 4 tokens held a TinyLlama-shaped prefill to 0.3x llama.cpp's.
template <class Ops, class Kind>
void dot_block(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
               int64_t n_tok, float* y, int64_t y_stride) {
  using RowFn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*, int64_t);
  static constexpr RowFn fns[kToks] = {row<Ops, Kind, 1>, row<Ops, Kind, 2>, row<Ops, Kind, 3>, row<Ops, Kind, 4>};
  if constexpr (Kind::kBlock == kQKK)
    if (n_tok > kToks) return decoded_row_tiles<Ops, Kind>(k, w, w_stride, n_rows, x, x_stride, n_tok, y, y_stride);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t t0 = 0; t0 < n_tok; t0 += kToks) {
      const int64_t nt = n_tok - t0 < kToks ? n_tok - t0 : kToks;
      fns[nt - 1](k, w + r * w_stride, x + t0 * x_stride, x_stride, y + t0 * y_stride + r, y_stride);
    }
}

}  // namespace
}  // namespace duet::mix_simd

// The level's entry points (quant_mix_kernels.h), over its Ops.
#define DUET_MIX_DEFINE_KIND(name, Kind)                                                    \
  float vec_dot_##name(int64_t k, const void* w, const void* x) {                          \
    return mix_simd::vec_dot<Ops, mix_simd::Kind>(k, w, x);                                \
  }                                                                                         \
  void dot_block_##name(int64_t k, const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, \
                        int64_t n_tok, float* y, int64_t ys) {                              \
    mix_simd::dot_block<Ops, mix_simd::Kind>(k, w, ws, n_rows, x, xs, n_tok, y, ys);       \
  }
#define DUET_MIX_DEFINE_DOTS                      \
  DUET_MIX_DEFINE_KIND(q5_0_q8_0, Q5_0Kind)       \
  DUET_MIX_DEFINE_KIND(q5_1_q8_1, Q5_1Kind)       \
  DUET_MIX_DEFINE_KIND(iq4_nl_q8_0, IQ4_NLKind)   \
  DUET_MIX_DEFINE_KIND(q2_K_q8_K, Q2_KKind)       \
  DUET_MIX_DEFINE_KIND(q3_K_q8_K, Q3_KKind)       \
  DUET_MIX_DEFINE_KIND(iq4_xs_q8_K, IQ4_XSKind)   \
  DUET_MIX_DEFINE_KIND(tq1_0_q8_K, TQ1_0Kind)     \
  DUET_MIX_DEFINE_KIND(tq2_0_q8_K, TQ2_0Kind)     \
  DUET_MIX_DEFINE_KIND(iq3_s_q8_K, IQ3_SKind)
