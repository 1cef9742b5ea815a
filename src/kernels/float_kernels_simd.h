// The float weight types' kernels of the two SIMD levels, written once over a
// width trait V (kernels/vec.h) and a tiling P (Tiles below). One V-wide
// accumulator per (weight row, token) pair; the tail of a row is copied into
// zero-padded buffers and summed as one more step. A dot is summed in the
// same order whether it is computed alone (vec_dot, decode) or inside a
// register block of rows x tokens (prefill), so the two agree bit for bit.
// Include only from float_kernels_avx2.cc / float_kernels_avx512.cc.
#pragma once

#include <array>
#include <cstring>
#include <utility>

#include "kernels/float_kernels.h"
#include "kernels/vec.h"

namespace duet::float_simd {
namespace {

// Which weights a step prefetches: the next rows of the block while one
// token passes them (decode, bound by memory), or 2 KiB ahead in the row
// while one row meets several tokens (too few weight loads are in flight
// then to cover DRAM latency).
enum class Prefetch { kNextRows, kAhead };

// kRows x kToks: the register block. kChunk: the elements of k summed per
// partial dot; partial dots are added in order, the same for one token or
// many, so a block's weight rows stay in cache chunk by chunk. Up to
// kStreamToks tokens, dot_block takes one row at a time.
template <int kRows, int kToks, int64_t kStream, Prefetch kWhat>
struct Tiles {
  static constexpr int kMaxRows = kRows;
  static constexpr int kMaxToks = kToks;
  static constexpr int64_t kChunk = 1024;
  static constexpr int64_t kStreamToks = kStream;
  // The prefetch of a step's weights at p, rows ws bytes apart.
  template <int R, int T>
  static void prefetch(const uint8_t* p, size_t ws) {
    if constexpr (kWhat == Prefetch::kNextRows && T == 1)
      _mm_prefetch(reinterpret_cast<const char*>(p + R * ws), _MM_HINT_T0);
    if constexpr (kWhat == Prefetch::kAhead && R == 1 && T > 1)
      _mm_prefetch(reinterpret_cast<const char*>(p + 2048), _MM_HINT_T0);
  }
};

template <class V, class P, class W>
struct Kernels {
  using F = typename V::F;
  static constexpr int64_t kLanes = V::kLanes;

  // One step of kLanes elements at element offset i, for R rows x T tokens.
  // kPrefetch: whether the rows go on beyond (not for the copied tail).
  template <int R, int T, bool kPrefetch>
  [[gnu::always_inline]] static void step(F (&acc)[R][T], const uint8_t* w, size_t ws, const float* x, int64_t xs,
                                          int64_t i) {
    F xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = V::load(x + t * xs + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = w + r * ws + i * W::kBytes;
      if constexpr (kPrefetch) P::template prefetch<R, T>(p, ws);
      const F wv = W::load(p);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = V::fmadd(wv, xv[t], acc[r][t]);
    }
  }

  // y[t * ys + r] (+)= dot(row r, x row t) over n elements for R rows and T
  // tokens: stores when `add` is false, adds the partial dot when true.
  template <int R, int T>
  static void micro(int64_t n, const uint8_t* w, size_t ws, const float* x, int64_t xs, float* y, int64_t ys,
                    bool add) {
    F acc[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
    const int64_t n_full = n - n % kLanes;
    for (int64_t i = 0; i < n_full; i += kLanes) step<R, T, true>(acc, w, ws, x, xs, i);
    if (n_full < n) {
      const size_t rest = static_cast<size_t>(n - n_full);
      alignas(64) uint8_t w_tail[R][kLanes * W::kBytes] = {};
      alignas(64) float x_tail[T][kLanes] = {};
      for (int r = 0; r < R; ++r) std::memcpy(w_tail[r], w + r * ws + n_full * W::kBytes, rest * W::kBytes);
      for (int t = 0; t < T; ++t) std::memcpy(x_tail[t], x + t * xs + n_full, rest * sizeof(float));
      step<R, T, false>(acc, &w_tail[0][0], sizeof(w_tail[0]), &x_tail[0][0], kLanes, 0);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const float p = V::reduce_add(acc[r][t]);
        y[t * ys + r] = add ? y[t * ys + r] + p : p;
      }
  }

  using MicroFn = void (*)(int64_t, const uint8_t*, size_t, const float*, int64_t, float*, int64_t, bool);

  // micro<R, T> for every R <= kMaxRows, T <= kMaxToks, at [(R-1) * kMaxToks + T-1].
  template <int... I>
  static constexpr std::array<MicroFn, sizeof...(I)> micro_table(std::integer_sequence<int, I...>) {
    return {&micro<I / P::kMaxToks + 1, I % P::kMaxToks + 1>...};
  }
  static constexpr auto kMicro = micro_table(std::make_integer_sequence<int, P::kMaxRows * P::kMaxToks>());

  static void dot_block(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x_bytes,
                        size_t x_row_bytes, int64_t n_tok, float* y, int64_t y_stride) {
    const auto* x = reinterpret_cast<const float*>(x_bytes);
    const auto x_stride = static_cast<int64_t>(x_row_bytes / sizeof(float));
    // The micro call for chunk c0, tokens from t0 and rows from r0, at most
    // max_rows of them.
    const auto run = [&](int64_t c0, int64_t t0, int64_t r0, int64_t max_rows) {
      const int64_t n = k - c0 < P::kChunk ? k - c0 : P::kChunk;
      const int64_t nt = n_tok - t0 < P::kMaxToks ? n_tok - t0 : P::kMaxToks;
      const int64_t nr = n_rows - r0 < max_rows ? n_rows - r0 : max_rows;
      kMicro[(nr - 1) * P::kMaxToks + (nt - 1)](n, w + r0 * w_stride + c0 * W::kBytes, w_stride,
                                                x + t0 * x_stride + c0, x_stride, y + t0 * y_stride + r0,
                                                y_stride, c0 > 0);
    };
    if (n_tok <= P::kStreamToks) {
      // Few tokens (decode, speculative verification) are bound by memory:
      // a row at a time, every token passing while it sits in L1, keeps the
      // weights one linear stream. Sums keep their order.
      for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t c0 = 0; c0 < k; c0 += P::kChunk)
          for (int64_t t0 = 0; t0 < n_tok; t0 += P::kMaxToks) run(c0, t0, r, 1);
      return;
    }
    for (int64_t c0 = 0; c0 < k; c0 += P::kChunk)
      for (int64_t t0 = 0; t0 < n_tok; t0 += P::kMaxToks)
        for (int64_t r0 = 0; r0 < n_rows; r0 += P::kMaxRows) run(c0, t0, r0, P::kMaxRows);
  }

  static float vec_dot(int64_t k, const void* w_row, const void* x_row) {
    const auto* w = static_cast<const uint8_t*>(w_row);
    const auto* x = static_cast<const float*>(x_row);
    float y = 0.0f;
    for (int64_t c0 = 0; c0 < k; c0 += P::kChunk) {
      const int64_t n = k - c0 < P::kChunk ? k - c0 : P::kChunk;
      micro<1, 1>(n, w + c0 * W::kBytes, 0, x + c0, 0, &y, 0, c0 > 0);
    }
    return y;
  }

  static void to_float(const void* row, float* y, int64_t k) {
    const auto* p = static_cast<const uint8_t*>(row);
    const int64_t k_full = k - k % kLanes;
    for (int64_t i = 0; i < k_full; i += kLanes) V::store(y + i, W::load(p + i * W::kBytes));
    if (k_full < k) {
      alignas(64) uint8_t tail[kLanes * W::kBytes] = {};
      alignas(64) float out[kLanes];
      const size_t rest = static_cast<size_t>(k - k_full);
      std::memcpy(tail, p + k_full * W::kBytes, rest * W::kBytes);
      V::store(out, W::load(tail));
      std::memcpy(y + k_full, out, rest * sizeof(float));
    }
  }

  static void copy_f32(const float* x, void* y, int64_t k) {
    std::memcpy(y, x, static_cast<size_t>(k) * sizeof(float));
  }

  static constexpr TypeKernels make() { return {DType::F32, copy_f32, vec_dot, to_float, dot_block, P::kChunk}; }
};

// The three float types' kernels at width V with policy P.
template <class V, class P>
constexpr FloatTypeKernels float_types() {
  return {Kernels<V, P, vec::F32Elems<V>>::make(), Kernels<V, P, vec::F16Elems<V>>::make(),
          Kernels<V, P, vec::BF16Elems<V>>::make()};
}

}  // namespace
}  // namespace duet::float_simd
