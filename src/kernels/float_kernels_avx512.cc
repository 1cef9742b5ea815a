// AVX-512 kernels of the float weight types. One 16-lane accumulator per
// (weight row, token) pair, tails under a load mask: a dot is summed in the
// same order whether it is computed alone (vec_dot, decode) or inside a
// register block of rows x tokens (prefill).
#include <immintrin.h>

#include <utility>

#include "kernels/float_kernels.h"

// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment,
// which -Wall reports at every inlined use; nothing here reads such a value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace duet {
namespace {

constexpr int64_t kLanes = 16;
// 4 rows x 4 tokens: 16 accumulators + 4 activation vectors + 1 weight vector
// fit the 32 zmm registers; 8 loads feed 16 FMAs, so the FMA units, not the
// load ports, set the pace.
constexpr int kMaxRows = 4;
constexpr int kMaxToks = 4;
// k is summed in chunks whose partial dots are added in order, the same for
// one token or many. Chunk by chunk, a block's weight rows stay in L2 while
// every token passes, and 4 tokens' activations (16 KiB) stay in L1 while the
// weight rows stream past them.
constexpr int64_t kChunk = 1024;
// Up to this many tokens dot_block streams rows one at a time.
constexpr int64_t kStreamToks = 8;

// Each loads 16 weights at p as floats, or under mask m with zeros elsewhere.
struct F32Row {
  static constexpr int64_t kBytes = 4;
  static __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Row {
  static constexpr int64_t kBytes = 2;
  static __m512 load(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load(const uint8_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct BF16Row {
  static constexpr int64_t kBytes = 2;
  // bf16 is the top half of an f32: widen to 32 bits and shift into place.
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const uint8_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load(const uint8_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// One step of kLanes elements at element offset i, for R rows x T tokens.
template <class W, int R, int T, bool kMasked>
[[gnu::always_inline]] inline void step(__m512 (&acc)[R][T], const uint8_t* w, size_t ws,
                                        const float* x, int64_t xs, int64_t i, __mmask16 m) {
  __m512 xv[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    xv[t] = kMasked ? _mm512_maskz_loadu_ps(m, x + t * xs + i) : _mm512_loadu_ps(x + t * xs + i);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const uint8_t* p = w + r * ws + i * W::kBytes;
    // Several tokens per weight leave the out-of-order window too few weight
    // loads in flight to cover DRAM latency: fetch 2 KiB ahead explicitly.
    if constexpr (R == 1 && T > 1) _mm_prefetch(reinterpret_cast<const char*>(p + 2048), _MM_HINT_T0);
    const __m512 wv = kMasked ? W::load(p, m) : W::load(p);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
  }
}

// y[t * ys + r] (+)= dot(row r, x row t) over n elements for R rows and T
// tokens: stores when `add` is false, adds the partial dot when true.
template <class W, int R, int T>
void micro(int64_t n, const uint8_t* w, size_t ws, const float* x, int64_t xs, float* y,
           int64_t ys, bool add) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const int64_t n_full = n - n % kLanes;
  for (int64_t i = 0; i < n_full; i += kLanes) step<W, R, T, false>(acc, w, ws, x, xs, i, 0);
  if (n_full < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - n_full)) - 1);
    step<W, R, T, true>(acc, w, ws, x, xs, n_full, m);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float p = _mm512_reduce_add_ps(acc[r][t]);
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
  // The micro call for chunk c0, tokens from t0 and rows from r0, at most
  // max_rows of them.
  const auto run = [&](int64_t c0, int64_t t0, int64_t r0, int64_t max_rows) {
    const int64_t n = k - c0 < kChunk ? k - c0 : kChunk;
    const int64_t nt = n_tok - t0 < kMaxToks ? n_tok - t0 : kMaxToks;
    const int64_t nr = n_rows - r0 < max_rows ? n_rows - r0 : max_rows;
    Table::fns[(nr - 1) * kMaxToks + (nt - 1)](n, w + r0 * w_stride + c0 * W::kBytes, w_stride,
                                               x + t0 * x_stride + c0, x_stride,
                                               y + t0 * y_stride + r0, y_stride, c0 > 0);
  };
  if (n_tok <= kStreamToks) {
    // Few tokens (decode, speculative verification): bound by memory. A
    // row at a time, every token passing while it sits in L1, keeps the
    // weights one linear stream (~10% faster at one token than 4
    // interleaved rows, more at 4-8 tokens). Sums keep their order.
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t c0 = 0; c0 < k; c0 += kChunk)
        for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxToks) run(c0, t0, r, 1);
    return;
  }
  for (int64_t c0 = 0; c0 < k; c0 += kChunk)
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxToks)
      for (int64_t r0 = 0; r0 < n_rows; r0 += kMaxRows) run(c0, t0, r0, kMaxRows);
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
  float* out = static_cast<float*>(y);
  const int64_t k_full = k - k % kLanes;
  for (int64_t i = 0; i < k_full; i += kLanes) _mm512_storeu_ps(out + i, _mm512_loadu_ps(x + i));
  if (k_full < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - k_full)) - 1);
    _mm512_mask_storeu_ps(out + k_full, m, _mm512_maskz_loadu_ps(m, x + k_full));
  }
}

template <class W>
void to_float(const void* row, float* y, int64_t k) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t k_full = k - k % kLanes;
  for (int64_t i = 0; i < k_full; i += kLanes) _mm512_storeu_ps(y + i, W::load(p + i * W::kBytes));
  if (k_full < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - k_full)) - 1);
    _mm512_mask_storeu_ps(y + k_full, m, W::load(p + k_full * W::kBytes, m));
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

const FloatKernels* float_kernels_avx512(DType t) {
  switch (t) {
    case DType::F32: return &kF32;
    case DType::F16: return &kF16;
    case DType::BF16: return &kBF16;
    default: return nullptr;
  }
}

}  // namespace duet
