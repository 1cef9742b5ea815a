// AVX2 kernels of the quantized types: byte products with maddubs (unsigned
// x signed -> pairs of int16), widened with madd, so every block's integer sum
// is exact. The K-quants then apply the scales per super-block as
// quant_scalar does; the 32-element types keep 8 float lanes of per-block
// partial sums. Either way results differ from quant_scalar only in float
// rounding (addition order, fused multiply-adds). The activation quantizers
// match quant.cc bit for bit.
#include <immintrin.h>

#include <cstring>

#include "core/quant_blocks.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_simd.h"

namespace duet::quant_avx2 {
namespace {

using namespace quant_simd;
using vec::hmax;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline __m256 abs_ps(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

// roundf: truncate, then step one away from zero if the dropped part is >= 1/2
// (v - trunc(v) is exact). _mm256_round_ps alone rounds ties to even.
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 sign = _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), v);
  return _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(_mm256_set1_ps(1.f), sign)));
}

// Four vectors of 8 int32 in [-128, 127] -> 32 int8 in element order.
inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  // The packs work per 128-bit lane; put the 4-byte groups back in order.
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Quantizes 32 floats with step 1/id, rounding half away from zero; returns
// the sum of the quants.
inline int q8_block(const float* x, float id, int8_t* qs) {
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int i = 0; i < 4; ++i)
    q[i] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i8(q[0], q[1], q[2], q[3]));
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  return hsum256(s);
}

inline float absmax32(const float* x) {
  __m256 m = abs_ps(_mm256_loadu_ps(x));
  for (int i = 1; i < 4; ++i) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * i)));
  return hmax(m);
}

// sum over 32 bytes of w*x (w any int8, x in [-127, 127]) as 8 int32 lanes.
inline __m256i dot_i8(__m256i w, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// sum over 32 bytes of q*x, q unsigned <= 31, x any int8, as 16 int16 lanes.
inline __m256i dot_u8_i16(__m256i q, __m256i x) { return _mm256_maddubs_epi16(q, x); }

// Broadcasts 16-bit lane j of the low 128 bits of v to all lanes.
inline __m256i broadcast_word(__m256i v, int j) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
}

}  // namespace

// ---- Activation quantizers -------------------------------------------------------

void quantize_row_q8_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t b = 0; b < k / kQK32; ++b, x += kQK32) {
    const float d = absmax32(x) / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    q8_block(x, id, y[b].qs);
  }
}

void quantize_row_q8_1(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t b = 0; b < k / kQK32; ++b, x += kQK32) {
    const float d = absmax32(x) / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    const int sum = q8_block(x, id, y[b].qs);
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    y[b].s = _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT);
  }
}

void quantize_row_q8_K(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b, x += kQKK) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < kQKK; i += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + i)));
    const float amax = hmax(m);
    if (amax == 0.f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The first element of largest magnitude gives the sign, as in the reference.
    float max = 0.f;
    for (int i = 0; i < kQKK; i += 8) {
      const __m256 eq = _mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + i)), _mm256_set1_ps(amax), _CMP_EQ_OQ);
      if (const int mask = _mm256_movemask_ps(eq)) {
        max = x[i + __builtin_ctz(mask)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vis = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int g = 0; g < kQKK; g += 32) {
      __m256i q[4];
      for (int i = 0; i < 4; ++i)  // cvtps rounds half to even, like nearest_int
        q[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 8 * i), vis)), top);
      const __m256i p = pack_i8(q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + g), p);
      // Sums of 16: pairs of bytes, then quads, then two hadds.
      __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
      s = _mm256_hadd_epi32(s, s);
      s = _mm256_hadd_epi32(s, s);
      y[b].bsums[g / 16] = static_cast<int16_t>(_mm256_extract_epi32(s, 0));
      y[b].bsums[g / 16 + 1] = static_cast<int16_t>(_mm256_extract_epi32(s, 4));
    }
    y[b].d = 1.f / iscale;
  }
}

// ---- Dot products ----------------------------------------------------------------

namespace {

// A row of nb 32-element blocks in two independent FMA chains; block(b, acc)
// adds block b into acc.
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

}  // namespace

float vec_dot_q8_0_q8_0(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ8_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  return two_chains(k / kQK32, [&](int64_t b, __m256 acc) {
    const __m256 d = _mm256_set1_ps(f16(w[b].d) * f16(x[b].d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(load256(w[b].qs), load256(x[b].qs))), acc);
  });
}

float vec_dot_q4_0_q8_0(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  return two_chains(k / kQK32, [&](int64_t b, __m256 acc) {
    const __m256i q = unpack_nibbles(load128(w[b].qs));
    const __m256i xq = load256(x[b].qs);
    // (q - 8) * x = q*x - 8*x, both pair sums fit int16.
    const __m256i p = _mm256_sub_epi16(dot_u8_i16(q, xq), dot_u8_i16(_mm256_set1_epi8(8), xq));
    const __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    const __m256 d = _mm256_set1_ps(f16(w[b].d) * f16(x[b].d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  });
}

float vec_dot_q4_1_q8_1(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  const int64_t nb = k / kQK32;
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i q = unpack_nibbles(load128(w[b].qs));
    const __m256i s = _mm256_madd_epi16(dot_u8_i16(q, load256(x[b].qs)), _mm256_set1_epi16(1));
    const __m256 d = _mm256_set1_ps(f16(w[b].d) * f16(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    offsets += f16(w[b].m) * f16(x[b].s);
  }
  return hsum(acc) + offsets;
}

namespace {

// Q4_K and Q5_K: quants(block, c) gives the unsigned quants of 64-element
// chunk c, sub-block 2c (32 bytes) and 2c + 1 (32 bytes).
template <class Block, class Quants>
float k4_dot(int64_t k, const void* vw, const void* vx, Quants quants) {
  const auto* w = static_cast<const Block*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    uint64_t scales, mins;
    k4_unpack(w[b].scales, &scales, &mins);
    const __m256i sc16 = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales))));
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const auto [lo, hi] = quants(w[b], c);
      const __m256i p_lo = dot_u8_i16(lo, load256(x[b].qs + 64 * c));
      const __m256i p_hi = dot_u8_i16(hi, load256(x[b].qs + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_lo, broadcast_word(sc16, 2 * c)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_hi, broadcast_word(sc16, 2 * c + 1)));
    }
    const float d = x[b].d * f16(w[b].d);
    const float dmin = x[b].d * f16(w[b].dmin);
    sum += d * static_cast<float>(hsum256(isum)) -
           dmin * static_cast<float>(k4_min_sum(mins, x[b].bsums));
  }
  return sum;
}

struct Halves {
  __m256i lo, hi;
};

template <class Block>
Halves k4_nibbles(const Block& w, int c) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i qs = load256(w.qs + 32 * c);
  return {_mm256_and_si256(qs, low4), _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4)};
}

}  // namespace

float vec_dot_q4_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return k4_dot<BlockQ4_K>(k, vw, vx, k4_nibbles<BlockQ4_K>);
}

float vec_dot_q5_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return k4_dot<BlockQ5_K>(k, vw, vx, [](const BlockQ5_K& w, int c) {
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i qh = load256(w.qh);
    // Bit 2c (2c+1) of qh[l] is bit 4 of element 64c+l (64c+32+l): move it
    // to bit 0 of its byte, then to bit 4 (16-bit shifts, masked per byte).
    const __m256i h_lo = _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), 4), bit4);
    const __m256i h_hi =
        _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), 4), bit4);
    const Halves q = k4_nibbles(w, c);
    return Halves{_mm256_or_si256(q.lo, h_lo), _mm256_or_si256(q.hi, h_hi)};
  });
}

float vec_dot_q6_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    // Scales as int16: words 0-7 (first half) in the low lane, 8-15 in the high.
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(w[b].scales));
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
      const __m256i ql0 = load256(w[b].ql + 64 * h);
      const __m256i ql1 = load256(w[b].ql + 64 * h + 32);
      const __m256i qh = load256(w[b].qh + 32 * h);
      // Quarter r: low nibbles from ql0/ql1 (low, then high), 2 bits from qh.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, low4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, low4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                          _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
      };
      for (int r = 0; r < 4; ++r) {
        const __m256i p = dot_u8_i16(q[r], load256(x[b].qs + 128 * h + 32 * r));
        // Sub-blocks 2r and 2r+1 of this half: one scale per 128-bit lane.
        const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * r + 1))),
                                              _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * r))));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc_h, pick)));
      }
    }
    // q6 - 32: subtract 32 * sum_j scale_j * bsum_j.
    const int total = hsum256(isum) - 32 * q6_offset_sum(w[b].scales, x[b].bsums);
    sum += (f16(w[b].d) * x[b].d) * static_cast<float>(total);
  }
  return sum;
}

}  // namespace duet::quant_avx2
