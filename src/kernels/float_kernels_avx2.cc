// AVX2 kernels of the float weight types. One 8-lane accumulator per (weight
// row, token) pair; the tail is copied into zero-padded buffers and summed as
// one more step. A dot is summed in the same order whether it is computed
// alone (vec_dot, decode) or inside a register block of rows x tokens.
#include <immintrin.h>

#include <cstring>
#include <utility>

#include "kernels/float_kernels.h"

namespace duet {
namespace {

constexpr int64_t kLanes = 8;
// 4 rows x 2 tokens: 8 accumulators + 2 activation vectors + 1 weight vector
// stay within the 16 ymm registers.
constexpr int kMaxRows = 4;
constexpr int kMaxToks = 2;
// k is summed in chunks whose partial dots are added in order, the same for
// one token or many, so a block's weight rows stay in cache chunk by chunk.
constexpr int64_t kChunk = 1024;

// Each loads 8 weights at p as floats.
struct F32Row {
  static constexpr int64_t kBytes = 4;
  static __m256 load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct F16Row {
  static constexpr int64_t kBytes = 2;
  static __m256 load(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct BF16Row {
  static constexpr int64_t kBytes = 2;
  // bf16 is the top half of an f32: widen to 32 bits and shift into place.
  static __m256 load(const uint8_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One step of kLanes elements at element offset i, for R rows x T tokens.
// kPrefetch: whether the next R rows lie beyond (not for the copied tail).
template <class W, int R, int T, bool kPrefetch = T == 1>
[[gnu::always_inline]] inline void step(__m256 (&acc)[R][T], const uint8_t* w, size_t ws,
                                        const float* x, int64_t xs, int64_t i) {
  __m256 xv[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x + t * xs + i);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const uint8_t* p = w + r * ws + i * W::kBytes;
    // Decode (one token) is bound by memory: fetch the next block's rows early.
    if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(p + R * ws), _MM_HINT_T0);
    const __m256 wv = W::load(p);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
  }
}

// y[t * ys + r] (+)= dot(row r, x row t) over n elements for R rows and T
// tokens: stores when `add` is false, adds the partial dot when true.
template <class W, int R, int T>
void micro(int64_t n, const uint8_t* w, size_t ws, const float* x, int64_t xs, float* y,
           int64_t ys, bool add) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t n_full = n - n % kLanes;
  for (int64_t i = 0; i < n_full; i += kLanes) step<W, R, T>(acc, w, ws, x, xs, i);
  if (n_full < n) {
    const size_t rest = static_cast<size_t>(n - n_full);
    alignas(32) uint8_t w_tail[R][kLanes * W::kBytes] = {};  // [R][kLanes] weights
    alignas(32) float x_tail[T][kLanes] = {};
    for (int r = 0; r < R; ++r)
      std::memcpy(w_tail[r], w + r * ws + n_full * W::kBytes, rest * W::kBytes);
    for (int t = 0; t < T; ++t) std::memcpy(x_tail[t], x + t * xs + n_full, rest * sizeof(float));
    step<W, R, T, false>(acc, &w_tail[0][0], sizeof(w_tail[0]), &x_tail[0][0], kLanes, 0);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float p = hsum(acc[r][t]);
      y[t * ys + r] = add ? y[t * ys + r] + p : p;
    }
}

using MicroFn = void (*)(int64_t, const uint8_t*, size_t, const float*, int64_t, float*, int64_t,
                        bool);

// micro<W, R, T> for every R <= kMaxRows, T <= kMaxToks, at [(R-1) * kMaxToks + T-1].
template <class W, class Seq>
struct MicroTable;
template <class W, int... I>
struct MicroTable<W, std::integer_sequence<int, I...>> {
  static constexpr MicroFn fns[] = {&micro<W, I / kMaxToks + 1, I % kMaxToks + 1>...};
};

template <class W>
void dot_block(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const float* x,
               int64_t x_stride, int64_t n_tok, float* y, int64_t y_stride) {
  using Table = MicroTable<W, std::make_integer_sequence<int, kMaxRows * kMaxToks>>;
  for (int64_t c0 = 0; c0 < k; c0 += kChunk) {
    const int64_t n = k - c0 < kChunk ? k - c0 : kChunk;
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxToks) {
      const int64_t nt = n_tok - t0 < kMaxToks ? n_tok - t0 : kMaxToks;
      for (int64_t r0 = 0; r0 < n_rows; r0 += kMaxRows) {
        const int64_t nr = n_rows - r0 < kMaxRows ? n_rows - r0 : kMaxRows;
        Table::fns[(nr - 1) * kMaxToks + (nt - 1)](
            n, w + r0 * w_stride + c0 * W::kBytes, w_stride, x + t0 * x_stride + c0, x_stride,
            y + t0 * y_stride + r0, y_stride, c0 > 0);
      }
    }
  }
}

template <class W>
float vec_dot(int64_t k, const void* w_row, const void* x_row) {
  const auto* w = static_cast<const uint8_t*>(w_row);
  const auto* x = static_cast<const float*>(x_row);
  float y = 0.0f;
  for (int64_t c0 = 0; c0 < k; c0 += kChunk) {
    const int64_t n = k - c0 < kChunk ? k - c0 : kChunk;
    micro<W, 1, 1>(n, w + c0 * W::kBytes, 0, x + c0, 0, &y, 0, c0 > 0);
  }
  return y;
}

void copy_f32(const float* x, void* y, int64_t k) {
  std::memcpy(y, x, static_cast<size_t>(k) * sizeof(float));
}

template <class W>
void to_float(const void* row, float* y, int64_t k) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t k_full = k - k % kLanes;
  for (int64_t i = 0; i < k_full; i += kLanes) _mm256_storeu_ps(y + i, W::load(p + i * W::kBytes));
  if (k_full < k) {
    alignas(32) uint8_t tail[kLanes * W::kBytes] = {};
    alignas(32) float out[kLanes];
    const size_t rest = static_cast<size_t>(k - k_full);
    std::memcpy(tail, p + k_full * W::kBytes, rest * W::kBytes);
    _mm256_store_ps(out, W::load(tail));
    std::memcpy(y + k_full, out, rest * sizeof(float));
  }
}

template <class W>
constexpr FloatKernels make() {
  return {{DType::F32, copy_f32, vec_dot<W>, to_float<W>}, dot_block<W>, kChunk};
}

constexpr FloatKernels kF32 = make<F32Row>();
constexpr FloatKernels kF16 = make<F16Row>();
constexpr FloatKernels kBF16 = make<BF16Row>();

}  // namespace

const FloatKernels* float_kernels_avx2(DType t) {
  switch (t) {
    case DType::F32: return &kF32;
    case DType::F16: return &kF16;
    case DType::BF16: return &kBF16;
    default: return nullptr;
  }
}

}  // namespace duet
