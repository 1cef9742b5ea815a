// BF16 weights' prefill by AVX-512 BF16: vdpbf16ps multiplies 16 lanes of
// bf16 pairs and adds both products to an f32 lane, 32 products per
// instruction where the widening kernel's fma does 16.
//
// The packed layout stays packed_gemm.h's (per k, the 16 rows' values): a
// 64-byte load holds k and k + 1 of the 16 rows, and one vpermw interleaves
// them into the 16 (even, odd) dwords vdpbf16ps reads. The activations are
// rounded to bf16 once per call (RNE, by vcvtne2ps2bf16) into
// (x[2j], x[2j + 1]) dwords. Tiles of two groups x 8 tokens share each
// broadcast pair between two vdpbf16ps (with one group a broadcast per
// vdpbf16ps, the loads held gate/up at ~240 GFLOP/s a thread; shared, ~340,
// 73 % of the BF16 dot probe); an odd last group runs 16 tokens at a time.
// The sums are not float_micro's bits (bf16
// activations, pair products, the instruction's own order), so this path is
// chosen by the registry only where the CPU has the instruction and
// DUET_BF16_DOT=1 asks for it (off by default: docs/performance.md, "BF16
// prefill by AVX-512 BF16", says why), and only for batches of more than
// kFmaMaxToks tokens and rows of at most kDotMaxK: decode, small batches
// and long rows stay on the fma kernels.
#include <immintrin.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/packed_gemm.h"
#include "kernels/token_blocks.h"

#include "kernels/avx512_quiet.h"

// The whole file runs only where the CPU has AVX512_BF16 (bf16_dot_enabled).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512bf16"))), apply_to = function)
#else
#pragma GCC target("avx512bf16")
#endif

namespace duet {
namespace {

constexpr int kTileToks = 16;  // 16 accumulators: ~3x vdpbf16ps' latency x throughput
constexpr int kPairTileToks = 8;  // two groups: 16 accumulators
constexpr int64_t kFmaMaxToks = 12;  // kPackedAvx512's float kMaxToks: one pass over the weights
// Each call rounds all its tokens' activations, a pass over them that the
// fma kernels, reading them broadcast between fmas, do not make: against one
// group that pass cost more than the doubled products gained (TinyLlama's
// down projection, 512 tokens: ~0.85x the fma kernels' rate; gate/up, 4
// groups a call: ~2x). matmul's row tiles (256 KiB of weights) hold one
// group of BF16 rows longer than this; the choice goes by k, not by the
// call's groups, so that no split of rows across threads changes the bits.
constexpr int64_t kDotMaxK = 4096;

// acc += w . the bf16 pair at p broadcast ({1to16}: GCC 12 would emit a
// separate vpbroadcastd per instruction).
[[gnu::always_inline]] inline __m512 dpbf16_bcast(__m512 acc, __m512i w, const uint32_t* p) {
  asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
  return acc;
}

// Word 2r <- word r (row r's even k), word 2r + 1 <- word 16 + r (odd k).
inline __m512i pair_index() {
  alignas(64) uint16_t idx[32];
  for (int r = 0; r < 16; ++r) {
    idx[2 * r] = static_cast<uint16_t>(r);
    idx[2 * r + 1] = static_cast<uint16_t>(16 + r);
  }
  return _mm512_load_si512(idx);
}

// G groups (16 rows each, group_bytes apart) against T tokens of kp bf16
// pairs each (xp dwords apart); an odd k's last element pairs with a zero in
// both. Two groups share each broadcast pair: half the loads per vdpbf16ps.
template <int G, int T>
void dot_micro(int64_t k, const uint8_t* w, int64_t group_bytes, const uint32_t* x, size_t xp, float* y,
               int64_t ys) {
  const __m512i idx = pair_index();
  __m512 acc[G][T];
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[g][t] = _mm512_setzero_ps();
  const auto step = [&](const __m512i (&wv)[G], int64_t j) {
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      if constexpr (G == 1) {
        acc[0][t] = dpbf16_bcast(acc[0][t], wv[0], x + t * xp + j);
      } else {
        const auto xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[t * xp + j]));
        for (int g = 0; g < G; ++g) acc[g][t] = _mm512_dpbf16_ps(acc[g][t], (__m512bh)wv[g], xv);
      }
    }
  };
  int64_t j = 0;
  for (; 2 * j + 1 < k; ++j, w += 64) {
    __m512i wv[G];
    for (int g = 0; g < G; ++g) wv[g] = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(w + g * group_bytes));
    step(wv, j);
  }
  if (2 * j < k) {
    __m512i wv[G];
    for (int g = 0; g < G; ++g)
      wv[g] = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * group_bytes)));
    step(wv, j);
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(y + t * ys + g * kPackRows, acc[g][t]);
}

using DotFn = void (*)(int64_t, const uint8_t*, int64_t, const uint32_t*, size_t, float*, int64_t);

template <int G, int... T>
constexpr std::array<DotFn, sizeof...(T)> dot_fns(std::integer_sequence<int, T...>) {
  return {&dot_micro<G, T + 1>...};
}

// One token's k floats as bf16 pairs (RNE), the last pair of an odd k
// padded with zero.
void to_bf16_pairs(const float* x, int64_t k, uint32_t* out) {
  int64_t i = 0;
  for (; i + 32 <= k; i += 32)
    _mm512_storeu_si512(out + i / 2, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
  if (i < k) {
    const int64_t n = k - i;
    const auto lo_mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    const auto hi_mask = static_cast<__mmask16>(n <= 16 ? 0 : (1u << (n - 16)) - 1);
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi_mask, x + i + 16), _mm512_maskz_loadu_ps(lo_mask, x + i));
    const int64_t pairs = (n + 1) / 2;
    _mm512_mask_storeu_epi32(out + i / 2, static_cast<__mmask16>((1u << pairs) - 1), (__m512i)v);
  }
}

}  // namespace

void packed_gemm_bf16_dot(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* xb, size_t xs,
                          int64_t n_tok, float* y, int64_t ys) {
  static constexpr auto one = dot_fns<1>(std::make_integer_sequence<int, kTileToks>());
  static constexpr auto two = dot_fns<2>(std::make_integer_sequence<int, kPairTileToks>());
  // Rows of pairs a line longer than k needs: at k = 2048 a tile's 16 rows
  // 4 KiB apart read lines of one L1 set.
  const int64_t kp = (k + 1) / 2 + 16;
  const size_t pair_bytes = static_cast<size_t>(kp) * 4;
  const int64_t group_bytes = k * kPackRows * 2;
  const int64_t tok_block = tokens_per_block(pair_bytes, kTileToks);
  thread_local std::vector<uint32_t> pairs;
  const int64_t block_toks = n_tok < tok_block ? n_tok : tok_block;
  if (pairs.size() < static_cast<size_t>(block_toks * kp)) pairs.resize(static_cast<size_t>(block_toks * kp));
  for (int64_t t0 = 0; t0 < n_tok; t0 += tok_block) {
    const int64_t nt = n_tok - t0 < tok_block ? n_tok - t0 : tok_block;
    for (int64_t t = 0; t < nt; ++t)
      to_bf16_pairs(reinterpret_cast<const float*>(xb + (t0 + t) * xs), k, pairs.data() + t * kp);
    int64_t g = 0;
    for (; g + 2 <= n_groups; g += 2)
      for (int64_t t = 0; t < nt; t += kPairTileToks) {
        const int64_t n = nt - t < kPairTileToks ? nt - t : kPairTileToks;
        two[n - 1](k, w + g * group_bytes, group_bytes, pairs.data() + t * kp, static_cast<size_t>(kp),
                   y + (t0 + t) * ys + g * kPackRows, ys);
      }
    if (g < n_groups)
      for (int64_t t = 0; t < nt; t += kTileToks) {
        const int64_t n = nt - t < kTileToks ? nt - t : kTileToks;
        one[n - 1](k, w + g * group_bytes, group_bytes, pairs.data() + t * kp, static_cast<size_t>(kp),
                   y + (t0 + t) * ys + g * kPackRows, ys);
      }
  }
}

bool bf16_dot_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("DUET_BF16_DOT");
    return cpu_features().avx512bf16 && env && std::strcmp(env, "1") == 0;
  }();
  return on;
}

namespace {

void gemm_bf16(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t xs, int64_t n_tok,
               float* y, int64_t ys) {
  if (n_tok > kFmaMaxToks && k <= kDotMaxK) return packed_gemm_bf16_dot(k, w, n_groups, x, xs, n_tok, y, ys);
  kPackedAvx512.bf16.gemm(k, w, n_groups, x, xs, n_tok, y, ys);
}

}  // namespace

const PackedKernels kPackedAvx512Bf16Dot = {kFloatActs, &gemm_bf16, nullptr};

}  // namespace duet

#if defined(__clang__)
#pragma clang attribute pop
#endif
