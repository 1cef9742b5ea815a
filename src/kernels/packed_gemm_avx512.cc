// AVX-512 VNNI kernels of the packed Q8_0 / Q4_0 layout (packed_gemm.h).
// A micro-kernel runs one 16-row group against up to 8 tokens: per block,
// 8 int32 sum vectors per token start at the activation's -offset * sum,
// take 8 vpdpbusd (weights x 4 broadcast activation bytes), and are scaled
// into the token's float accumulator with one convert, multiply and fma.
#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "core/quant_blocks.h"
#include "kernels/packed_gemm.h"

// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment,
// which -Wall reports at every inlined use; nothing here reads such a value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace duet {
namespace {

constexpr int kMaxToks = 8;  // 8 sums + 8 accumulators + weights: 20 zmm
// Tokens whose activations stay in L2 while every group of a tile passes them.
constexpr int64_t kTokBlock = 64;
// Decode streams the matrix once: fetch this far ahead of the loads.
constexpr int kPrefetchBytes = 2048;

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

struct Q8 {
  static constexpr int kOffset = 128;
  static constexpr int64_t kBlockBytes = 32 + 16 * 32;
  template <int T>
  [[gnu::always_inline]] static void dots(__m512i (&s)[T], const uint8_t* qs, const uint8_t* x, size_t xs) {
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i w = _mm512_loadu_si512(qs + 64 * c);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        s[t] = _mm512_dpbusd_epi32(s[t], w, bcast4(reinterpret_cast<const PackedActBlock*>(x + t * xs)->qs + 4 * c));
    }
  }
};

struct Q4 {
  static constexpr int kOffset = 8;
  static constexpr int64_t kBlockBytes = 32 + 16 * 16;
  template <int T>
  [[gnu::always_inline]] static void dots(__m512i (&s)[T], const uint8_t* qs, const uint8_t* x, size_t xs) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(qs + 64 * j);
      const __m512i lo = _mm512_and_si512(raw, low);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = reinterpret_cast<const PackedActBlock*>(x + t * xs)->qs;
        s[t] = _mm512_dpbusd_epi32(s[t], lo, bcast4(xq + 4 * j));
        s[t] = _mm512_dpbusd_epi32(s[t], hi, bcast4(xq + 16 + 4 * j));
      }
    }
  }
};

// Rows of one group (16 outputs per token) against T tokens, all blocks.
template <class W, int T, bool kPrefetch>
void micro(int64_t nb, const uint8_t* blk, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  __m512 acc[T];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, blk += W::kBlockBytes, x += sizeof(PackedActBlock)) {
    if constexpr (kPrefetch)
      for (int64_t off = 0; off < W::kBlockBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + off, _MM_HINT_T0);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i s[T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm512_set1_epi32(reinterpret_cast<const PackedActBlock*>(x + t * xs)->start);
    W::template dots<T>(s, blk + 32, x, xs);
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(reinterpret_cast<const PackedActBlock*>(x + t * xs)->d));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
}

using MicroFn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*, int64_t);

template <class W, bool kPrefetch, int... T>
constexpr std::array<MicroFn, kMaxToks> micro_fns(std::integer_sequence<int, T...>) {
  return {&micro<W, T + 1, kPrefetch>...};
}

template <class W>
void gemm(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t xs, int64_t n_tok,
          float* y, int64_t ys) {
  static constexpr auto streaming = micro_fns<W, true>(std::make_integer_sequence<int, kMaxToks>());
  static constexpr auto tiled = micro_fns<W, false>(std::make_integer_sequence<int, kMaxToks>());
  const int64_t nb = k / kQK32;
  const int64_t group_bytes = nb * W::kBlockBytes;
  if (n_tok <= kMaxToks) {  // decode and small batches: one pass over the weights
    for (int64_t g = 0; g < n_groups; ++g)
      streaming[n_tok - 1](nb, w + g * group_bytes, x, xs, y + g * kPackRows, ys);
    return;
  }
  for (int64_t t0 = 0; t0 < n_tok; t0 += kTokBlock) {
    const int64_t t_end = n_tok - t0 < kTokBlock ? n_tok : t0 + kTokBlock;
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t t = t0; t < t_end; t += kMaxToks) {
        const int64_t nt = t_end - t < kMaxToks ? t_end - t : kMaxToks;
        // The first pass over a group brings it from memory: prefetch as
        // decode does (a batch of 16 decoding sequences is bound by that).
        const auto& fns = t == 0 ? streaming : tiled;
        fns[nt - 1](nb, w + g * group_bytes, x + t * xs, xs, y + t * ys + g * kPackRows, ys);
      }
  }
}

constexpr PackedKernels kQ8{Q8::kOffset, &gemm<Q8>};
constexpr PackedKernels kQ4{Q4::kOffset, &gemm<Q4>};

}  // namespace

const PackedKernels* packed_kernels_avx512(DType t) {
  switch (t) {
    case DType::Q8_0: return &kQ8;
    case DType::Q4_0: return &kQ4;
    default: return nullptr;
  }
}

}  // namespace duet
