// AVX-512 VNNI blocked kernels of Q8_0 and Q4_0 weights against Q8_0
// activations: each weight vector loaded serves every token of the block and
// each token's activations every row, so prefill and batched decode run on
// the int8 units instead of on loads. Two 32-element blocks fill one 512-bit vector. vpdpbusd wants
// unsigned x signed bytes: Q8_0 weights go unsigned as w + 128 (xor 0x80),
// Q4_0's nibbles are unsigned already; the offset (128, or Q4_0's 8) times
// the sum of x comes off through the accumulator's starting value, which
// depends only on the token and so is computed once for all rows. Each
// lane's exact int32 sum is then scaled by its block's d_w * d_x and added
// to the (row, token) accumulator.
#include <immintrin.h>

#include <array>
#include <utility>

#include "core/quant_blocks.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_simd.h"

#include "kernels/avx512_quiet.h"

namespace duet {
namespace {

using quant_simd::f16;

// The f16 scales of 8 consecutive blocks as floats in lanes 0-7.
template <class Block>
inline __m512 scales8(const Block* first) {
  return _mm512_castps256_ps512(quant_simd::scales8<Block>(&first->d));
}

constexpr int kRows = 4;  // 4 x 4 accumulators, 4 activation pairs, their
constexpr int kToks = 4;  // offsets and scales: 28 of the 32 zmm registers
// Up to this many tokens a call streams rows one at a time (see dot_block).
constexpr int64_t kStreamToks = 8;

// Lanes 0-7 = a, lanes 8-15 = b.
inline __m512 two_scales(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

// Bytes of blocks a and b (32 each) in one vector; b may be absent (zeros).
inline __m512i pair_bytes(const int8_t* a, const int8_t* b) {
  const __m512i lo = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
  return b ? _mm512_inserti64x4(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1) : lo;
}

struct Q8Weights {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  static __m512i load(const Block* a, const Block* b) {
    // An absent b reads as 0x80 bytes, whose dot with x's zero half is 0.
    const __m512i q = pair_bytes(a->qs, b ? b->qs : nullptr);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

struct Q4Weights {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;
  // 32 quants of one block: low nibbles (elements 0-15), then high (16-31).
  static __m256i nibbles(const Block* blk) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
  }
  static __m512i load(const Block* a, const Block* b) {
    if (!b) return _mm512_zextsi256_si512(nibbles(a));
    // Each block's 16 bytes twice, shifted right by 0 (low nibbles) or 4.
    const __m512i twice = _mm512_inserti64x4(
        _mm512_zextsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a->qs)))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs))), 1);
    const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                             0x0004000400040004LL, 0x0004000400040004LL);
    return _mm512_and_si512(_mm512_srlv_epi16(twice, shifts), _mm512_set1_epi8(0x0F));
  }
};

// Lane indices putting lane i in lanes 0-7 and lane i + 1 in lanes 8-15.
inline __m512i pair_lanes(int i) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_set1_epi32(i)), _mm256_set1_epi32(i + 1), 1);
}

// One step: block pair (b, b + 1) (b + 1 absent when !pair), with the pair's
// scales already in dw[r] and dx[t].
template <class W, int R, int T>
[[gnu::always_inline]] inline void pair_step(__m512 (&acc)[R][T], int64_t b, bool pair, const uint8_t* w,
                                             size_t ws, const uint8_t* x, size_t xs, const __m512 (&dw)[R],
                                             const __m512 (&dx)[T]) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::kOffset));
  __m512i xq[T], start[T];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + t * xs) + b;
    xq[t] = pair_bytes(xb[0].qs, pair ? xb[1].qs : nullptr);
    // Starting the dot at -offset * sum(x) leaves exactly sum(w * x).
    start[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xq[t]));
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const auto* wb = reinterpret_cast<const typename W::Block*>(w + r * ws) + b;
    // Several tokens per weight leave the out-of-order window too few weight
    // loads in flight to cover DRAM latency: fetch 2 KiB ahead explicitly.
    if constexpr (R == 1 && T > 1) _mm_prefetch(reinterpret_cast<const char*>(wb) + 2048, _MM_HINT_T0);
    const __m512i wq = W::load(wb, pair ? wb + 1 : nullptr);
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i s = _mm512_dpbusd_epi32(start[t], wq, xq[t]);
      acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], dx[t]), _mm512_cvtepi32_ps(s), acc[r][t]);
    }
  }
}

// acc[r][t] over blocks [0, nb) for R rows and T tokens: 8 blocks' scales
// are converted at once, then 4 pairs use them.
template <class W, int R, int T>
void micro(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  using WB = typename W::Block;
  __m512 acc[R][T];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    __m512 sw[R], sx[T], dw[R], dx[T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sw[r] = scales8(reinterpret_cast<const WB*>(w + r * ws) + b);
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) sx[t] = scales8(reinterpret_cast<const BlockQ8_0*>(x + t * xs) + b);
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
      const __m512i lanes = pair_lanes(i);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) dw[r] = _mm512_permutexvar_ps(lanes, sw[r]);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) dx[t] = _mm512_permutexvar_ps(lanes, sx[t]);
      pair_step<W, R, T>(acc, b + i, true, w, ws, x, xs, dw, dx);
    }
  }
  for (; b < nb; b += 2) {
    const bool pair = b + 1 < nb;
    __m512 dw[R], dx[T];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const auto* wb = reinterpret_cast<const WB*>(w + r * ws) + b;
      dw[r] = two_scales(f16(wb[0].d), pair ? f16(wb[1].d) : 0.0f);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + t * xs) + b;
      dx[t] = two_scales(f16(xb[0].d), pair ? f16(xb[1].d) : 0.0f);
    }
    pair_step<W, R, T>(acc, b, pair, w, ws, x, xs, dw, dx);
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
}

using MicroFn = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, int64_t);

template <class W, int R, int... T>
constexpr std::array<MicroFn, kToks> row_fns(std::integer_sequence<int, T...>) {
  return {&micro<W, R, T + 1>...};
}

template <class W, int... R>
constexpr std::array<std::array<MicroFn, kToks>, kRows> all_fns(std::integer_sequence<int, R...>) {
  return {row_fns<W, R + 1>(std::make_integer_sequence<int, kToks>())...};
}

template <class W>
void dot_block(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x,
               size_t x_stride, int64_t n_tok, float* y, int64_t y_stride) {
  static constexpr auto fns = all_fns<W>(std::make_integer_sequence<int, kRows>());
  const int64_t nb = k / kQK32;
  if (n_tok <= kStreamToks) {
    // Decode, speculative verification and small batches are bound by
    // memory: a row at a time (all tokens, 4 at a time, while it sits in
    // L1) keeps the weights one linear stream, which this machine's
    // prefetchers follow far better than 4 rows at once (2.4x at one
    // token). The accumulation per (row, token) is the same either way.
    static constexpr std::array<MicroFn, kToks> one_row = row_fns<W, 1>(std::make_integer_sequence<int, kToks>());
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t t0 = 0; t0 < n_tok; t0 += kToks) {
        const int64_t nt = n_tok - t0 < kToks ? n_tok - t0 : kToks;
        one_row[nt - 1](nb, w + r * w_stride, w_stride, x + t0 * x_stride, x_stride, y + t0 * y_stride + r, y_stride);
      }
    return;
  }
  for (int64_t t0 = 0; t0 < n_tok; t0 += kToks) {
    const int64_t nt = n_tok - t0 < kToks ? n_tok - t0 : kToks;
    for (int64_t r0 = 0; r0 < n_rows; r0 += kRows) {
      const int64_t nr = n_rows - r0 < kRows ? n_rows - r0 : kRows;
      fns[nr - 1][nt - 1](nb, w + r0 * w_stride, w_stride, x + t0 * x_stride, x_stride,
                         y + t0 * y_stride + r0, y_stride);
    }
  }
}

}  // namespace

namespace quant_avx512 {

void dot_block_q8_0(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
                    int64_t n_tok, float* y, int64_t y_stride) {
  dot_block<Q8Weights>(k, w, w_stride, n_rows, x, x_stride, n_tok, y, y_stride);
}

void dot_block_q4_0(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
                    int64_t n_tok, float* y, int64_t y_stride) {
  dot_block<Q4Weights>(k, w, w_stride, n_rows, x, x_stride, n_tok, y, y_stride);
}

}  // namespace quant_avx512
}  // namespace duet
