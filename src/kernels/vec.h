// Width traits of the two SIMD levels, so a kernel whose AVX2 and AVX-512
// versions differ only in vector width is written once against V::F (a float
// vector), V::kLanes and the operations below, and compiled to Vec256 in an
// *_avx2.cc file and to Vec512 in an *_avx512.cc one. Include only from those
// files (they need the ISA flags); the anonymous namespace gives each its own
// copy, since an inline function with external linkage built with AVX-512
// flags could be picked by the linker for the AVX2 callers too.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace duet::vec {
namespace {

// Lane 0 of `op` folded over the 8 lanes of v.
template <class Op>
inline float fold(__m256 v, Op op) {
  __m128 s = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = op(s, _mm_movehl_ps(s, s));
  s = op(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hsum(__m256 v) {
  return fold(v, [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
}

inline float hmax(__m256 v) {
  return fold(v, [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

// What differs between the widths only by the width in the intrinsics'
// names. Each trait adds half(p), a load of half a vector (kLanes halves).
// fma_chains, dot_chains: how many independent chains of FMAs (int8 dots)
// cover the instruction's latency x throughput product (the probes).
#define DUET_VEC_BY_NAME(W, fma_chains, dot_chains)                                           \
  static constexpr int kFmaChains = fma_chains;                                              \
  static constexpr int kDotChains = dot_chains;                                              \
  using F = __m##W;                                                                          \
  using I = __m##W##i;                                                                       \
  static constexpr int64_t kLanes = W / 32;                                                  \
  static F zero() { return _mm##W##_setzero_ps(); }                                          \
  static F set1(float a) { return _mm##W##_set1_ps(a); }                                     \
  static F load(const float* p) { return _mm##W##_loadu_ps(p); }                             \
  static void store(float* p, F v) { _mm##W##_storeu_ps(p, v); }                            \
  static F add(F a, F b) { return _mm##W##_add_ps(a, b); }                                   \
  static F sub(F a, F b) { return _mm##W##_sub_ps(a, b); }                                   \
  static F mul(F a, F b) { return _mm##W##_mul_ps(a, b); }                                   \
  static F min(F a, F b) { return _mm##W##_min_ps(a, b); }                                   \
  static F max(F a, F b) { return _mm##W##_max_ps(a, b); }                                   \
  static F fmadd(F a, F b, F c) { return _mm##W##_fmadd_ps(a, b, c); }                       \
  static F fnmadd(F a, F b, F c) { return _mm##W##_fnmadd_ps(a, b, c); }                     \
  /* The same in double lanes (kLanes / 2 of them). */                                       \
  using D = __m##W##d;                                                                       \
  static D set1_d(double a) { return _mm##W##_set1_pd(a); }                                  \
  static D mul_d(D a, D b) { return _mm##W##_mul_pd(a, b); }                                 \
  static D min_d(D a, D b) { return _mm##W##_min_pd(a, b); }                                 \
  static D max_d(D a, D b) { return _mm##W##_max_pd(a, b); }                                 \
  static D fmadd_d(D a, D b, D c) { return _mm##W##_fmadd_pd(a, b, c); }                     \
  static D fnmadd_d(D a, D b, D c) { return _mm##W##_fnmadd_pd(a, b, c); }                   \
  static I zero_i() { return _mm##W##_setzero_si##W(); }                                     \
  static I set1_i8(int8_t a) { return _mm##W##_set1_epi8(a); }                               \
  static I add_i32(I a, I b) { return _mm##W##_add_epi32(a, b); }                            \
  /* A transpose's first step: per 128-bit lane, t[2i] = (r2i[0], r2i+1[0],                  \
     r2i[1], r2i+1[1]) and t[2i+1] the same for elements 2, 3. */                            \
  static void interleave_pairs(const F* r, F* t) {                                           \
    for (int i = 0; i < kLanes / 2; ++i) {                                                   \
      t[2 * i] = _mm##W##_unpacklo_ps(r[2 * i], r[2 * i + 1]);                               \
      t[2 * i + 1] = _mm##W##_unpackhi_ps(r[2 * i], r[2 * i + 1]);                           \
    }                                                                                        \
  }                                                                                          \
  /* kLanes halves at p, widened. */                                                         \
  static F load_f16(const uint8_t* p) { return _mm##W##_cvtph_ps(half(p)); }                 \
  /* bf16 is the top half of an f32: widen to 32 bits and shift into place. */               \
  static F load_bf16(const uint8_t* p) {                                                     \
    return _mm##W##_castsi##W##_ps(_mm##W##_slli_epi32(_mm##W##_cvtepu16_epi32(half(p)), 16)); \
  }

struct Vec256 {
  static __m128i half(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  DUET_VEC_BY_NAME(256, 10, 8)
  static float reduce_add(F v) { return hsum(v); }
  static float reduce_max(F v) { return hmax(v); }
  // A lane mask (all ones or zero per lane); select(m, a, b) takes a's lanes
  // where m is set and b's elsewhere, keep(m, v) zeroes v outside m.
  using M = __m256;
  // Lanes i with a <= i < b (any ints).
  static M lanes_in(int a, int b) {
    const __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(a - 1)), _mm256_cmpgt_epi32(_mm256_set1_epi32(b), i)));
  }
  static F select(M m, F a, F b) { return _mm256_blendv_ps(b, a, m); }
  static F keep(M m, F v) { return _mm256_and_ps(m, v); }
  // r as an 8 x 8 matrix, transposed in place (r[i] lane j <-> r[j] lane i).
  static void transpose(F (&r)[8]) {
    F t[8], u[8];
    interleave_pairs(r, t);
    // u[4i + e], per lane: element e (low lane) or 4 + e (high lane) of rows 4i..4i+3.
    for (int i = 0; i < 2; ++i) {
      u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
      u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int e = 0; e < 4; ++e) {
      r[e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x20);
      r[4 + e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x31);
    }
  }
  // kLanes int8 at p, as floats.
  static F load_s8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  // out[0..16) = scale * the 16 int8 lanes of b.
  static void store_s8x16(float* out, __m128i b, F scale) {
    _mm256_storeu_ps(out, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b))));
    b = _mm_unpackhi_epi64(b, b);
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b))));
  }
  // acc + the u8 x s8 products of a and b, summed by 4 into int32 lanes. AVX2
  // has no dot-accumulate: maddubs (pairs -> s16), madd (-> s32), add.
  static I dot_u8s8(I acc, I a, I b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)));
  }
  static int32_t lane0(I v) { return _mm256_extract_epi32(v, 0); }
  static F round(F v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static D round_d(D v) { return _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n for whole floats n in [-145, 128], as two factors 2^(n/2) each
  // in float's normal range: for p in [0.7, 1.5) the first product is exact
  // and the second rounds once, into a subnormal where the result is one, as
  // AVX-512's scalef does.
  static F scale_pow2(F p, F n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1), rest = _mm256_sub_epi32(ni, half);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const __m256 b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, a), b);
  }
  // The same for whole doubles n in [-1077, 1024].
  static D scale_pow2_d(D p, D n) {
    const __m128i ni = _mm256_cvtpd_epi32(n);
    const __m128i half = _mm_srai_epi32(ni, 1), rest = _mm_sub_epi32(ni, half);
    const __m256i bias = _mm256_set1_epi64x(1023);
    const auto pow2 = [&](__m128i e) {
      return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(e), bias), 52));
    };
    return _mm256_mul_pd(_mm256_mul_pd(p, pow2(half)), pow2(rest));
  }
};

#if defined(__AVX512F__)
struct Vec512 {
  static __m256i half(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  DUET_VEC_BY_NAME(512, 12, 12)
  static float reduce_add(F v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }
  using M = __mmask16;  // as Vec256's M
  static M lanes_in(int a, int b) {
    const auto below = [](int n) { return n <= 0 ? 0u : n >= 16 ? 0xffffu : (1u << n) - 1; };
    return static_cast<M>(below(b) & ~below(a));
  }
  static F select(M m, F a, F b) { return _mm512_mask_mov_ps(b, m, a); }
  static F keep(M m, F v) { return _mm512_maskz_mov_ps(m, v); }
  // r as a 16 x 16 matrix, transposed in place.
  static void transpose(F (&r)[16]) {
    F t[16], u[16];
    interleave_pairs(r, t);
    // u[4i + q], lane L: element 4L + q of rows 4i..4i+3.
    for (int i = 0; i < 4; ++i) {
      const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
      const __m512d e = _mm512_castps_pd(t[4 * i + 2]), f = _mm512_castps_pd(t[4 * i + 3]);
      u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, e));
      u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, e));
      u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, f));
      u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, f));
    }
    // For each q, a 4 x 4 transpose of 128-bit lanes over the row quads.
    for (int q = 0; q < 4; ++q) {
      const F v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], _MM_SHUFFLE(2, 0, 2, 0));
      const F v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], _MM_SHUFFLE(3, 1, 3, 1));
      const F v2 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], _MM_SHUFFLE(2, 0, 2, 0));
      const F v3 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], _MM_SHUFFLE(3, 1, 3, 1));
      r[0 + q] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0));
      r[8 + q] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1));
      r[4 + q] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
      r[12 + q] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
    }
  }
  static F load_s8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store_s8x16(float* out, __m128i b, F scale) {
    _mm512_storeu_ps(out, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b))));
  }
  static I dot_u8s8(I acc, I a, I b) { return _mm512_dpbusd_epi32(acc, a, b); }
  // Lane 0 only: the lanes' sum overflows int32 (the vector adds wrap; a
  // reduction in int is undefined behaviour, which UBSan reports).
  static int32_t lane0(I v) { return _mm_cvtsi128_si32(_mm512_castsi512_si128(v)); }
  static F round(F v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static D round_d(D v) { return _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n, rounded once (into subnormals and zero as std::exp does).
  static F scale_pow2(F p, F n) { return _mm512_scalef_ps(p, n); }
  static D scale_pow2_d(D p, D n) { return _mm512_scalef_pd(p, n); }
};
#endif

#undef DUET_VEC_BY_NAME

// Loaders of V::kLanes weights of each float type at p, as floats.
template <class V>
struct F32Elems {
  static constexpr int64_t kBytes = 4;
  static typename V::F load(const uint8_t* p) { return V::load(reinterpret_cast<const float*>(p)); }
};
template <class V>
struct F16Elems {
  static constexpr int64_t kBytes = 2;
  static typename V::F load(const uint8_t* p) { return V::load_f16(p); }
};
template <class V>
struct BF16Elems {
  static constexpr int64_t kBytes = 2;
  static typename V::F load(const uint8_t* p) { return V::load_bf16(p); }
};

}  // namespace
}  // namespace duet::vec
