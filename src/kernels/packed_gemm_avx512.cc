// AVX-512 kernels of the packed layouts (packed_gemm.h). A micro-kernel runs
// one 16-row group against up to 16 (Q8_0, Q4_0), 12 (Q4_K, float) or 8 tokens.
// Q8_0 / Q4_0 (VNNI), per block: the 16 rows' weights sit in 8 registers;
// each token's int32 sums start at the activation's -offset * sum, take 8
// vpdpbusd (weights x 4 broadcast activation bytes), and go into the token's
// group sum with one convert and fma (weight scales); per group of 8 blocks,
// one fma applies the activation scale.
// F32 / F16 / BF16, per element k: the 16 rows' weights widened to one f32
// vector, one fma per token with x[t][k] broadcast, into the token's even-k
// or odd-k sum.
#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "core/quant_blocks.h"
#include "kernels/packed_gemm.h"
#include "kernels/packed_lowbit.h"
#include "kernels/token_blocks.h"
#include "kernels/vec.h"

#include "kernels/avx512_quiet.h"

namespace duet {
namespace {

// Decode streams the matrix once: fetch this far ahead of the loads (half as
// far leaves a 16-token Q8_0 batch ~20 % slower).
constexpr int kPrefetchBytes = 4096;
// The one-token kernels of Q5_0 / Q5_1 and Q3_K, which spend more ops per
// line, fetch twice as far (measured where each is defined).
constexpr int64_t kFarPrefetchBytes = 2 * kPrefetchBytes;

// acc += w (u8) . 4 bytes at p (s8) broadcast, with the broadcast folded into
// the instruction's memory operand ({1to16}); GCC 12 emits a separate
// vpbroadcastd for each, which here is one more vector op per vpdpbusd.
[[gnu::always_inline]] inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// The 32-element types: the weights' unsigned offset, and the bytes of one
// block of a group (16 f16 scales, then 16 rows of quants).
// Q5_1 has a second row of 16 f16 (its mins) before the quants.
template <int kOffsetV, int64_t kQuantBytes, bool kAffineV = false>
struct Int8Blocks {
  static constexpr bool kInt8 = true;
  static constexpr int kMaxToks = 16;
  static constexpr int kTileToks = 8;
  static constexpr int kOffset = kOffsetV;
  static constexpr bool kAffine = kAffineV;
  static constexpr int64_t kQuantAt = kAffine ? 64 : 32;
  static constexpr int64_t kBlockBytes = kQuantAt + 16 * kQuantBytes;
  static constexpr int64_t kOneAhead = kPrefetchBytes;  // micro_one's prefetch distance
  static int64_t group_bytes(int64_t k) { return k / kQK32 * kBlockBytes; }
};

// A block's 16 rows x 32 weights as 8 vectors; vector c meets activation
// bytes 4c..4c+3 of every token.
struct Q8 : Int8Blocks<128, 32> {
  [[gnu::always_inline]] static void load(const uint8_t* qs, __m512i (&w)[8]) {
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) w[c] = _mm512_loadu_si512(qs + 64 * c);
  }
};

// Nibble line j holds bytes 4j.. of the block in its low halves and 16 + 4j..
// in its high halves.
struct Q4 : Int8Blocks<8, 16> {
  [[gnu::always_inline]] static void load(const uint8_t* qs, __m512i (&w)[8]) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(qs + 64 * j);
      w[j] = _mm512_and_si512(raw, low);
      w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
    }
  }
};

// 64 bits at p as a byte mask (kmovq from memory).
[[gnu::always_inline]] inline __mmask64 load_mask(const uint8_t* p) {
  uint64_t bits;
  std::memcpy(&bits, p, 8);
  return _cvtu64_mask64(bits);
}

// IQ4_NL and IQ4_XS's 16 levels + 128 as u8, in every 128-bit lane for vpshufb.
inline __m512i iq4_table() {
  alignas(16) uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kIq4Levels[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// IQ4_NL: Q4_0's nibble lines hold indices into the levels.
struct IQ4NL : Int8Blocks<128, 16> {
  [[gnu::always_inline]] static void load(const uint8_t* qs, __m512i (&w)[8]) {
    const __m512i table = iq4_table();
    Q4::load(qs, w);
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) w[c] = _mm512_shuffle_epi8(table, w[c]);
  }
};

// vpternlogd's (a & b) | c, and c ? a : b.
constexpr int kAndOr = 0xEA;
constexpr int kSelect = 0xE4;

// Q3_K's level vectors of half h of a pair of sub-blocks (packed_lowbit.h):
// w[q] meets activation bytes 16h + 4q.. of the pair's block. 17 ops for the
// pair's 8 vectors where the third bits' masks took 22 and 8 mask loads.
[[gnu::always_inline]] inline void q3_levels(const uint8_t* lines, int h, __m512i (&w)[4]) {
  const __m512i seven = _mm512_set1_epi8(7), three = _mm512_set1_epi8(3);
  const __m512i a = _mm512_loadu_si512(lines), b = _mm512_loadu_si512(lines + 64);
  if (h == 0) {
    w[0] = _mm512_and_si512(a, seven);
    w[1] = _mm512_and_si512(_mm512_srli_epi16(a, 3), seven);
    w[2] = _mm512_and_si512(b, seven);
    w[3] = _mm512_and_si512(_mm512_srli_epi16(b, 3), seven);
    return;
  }
  const __m512i c = _mm512_loadu_si512(lines + 128);
  w[0] = _mm512_and_si512(c, seven);
  w[1] = _mm512_and_si512(_mm512_srli_epi16(c, 3), seven);
  // a's (b's) top 2 bits where `three` is set, c's bit 6 (7) moved to bit 2
  // elsewhere; then the bits the 16-bit shifts brought in are cleared.
  w[2] = _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 6), _mm512_srli_epi16(c, 4), three, kSelect),
                          seven);
  w[3] = _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 6), _mm512_srli_epi16(c, 5), three, kSelect),
                          seven);
}

// Q5_0 / Q5_1: Q4_0's nibbles, then one 64-bit mask per vector whose set
// bytes get the fifth bit (16).
template <int kOffsetV, bool kAffineV>
struct Q5 : Int8Blocks<kOffsetV, 20, kAffineV> {
  // micro_one's prefetch distance. In-process A/B from DRAM, 2 threads
  // (docs/performance.md, 2026-12-06): 8 KiB with the load below streamed
  // Q5_1 1.24x and Q5_0 1.18x as fast as 4 KiB with masked adds; 8 KiB
  // alone 1.13x, the load alone 1.02x; Q4_0 at 8 KiB 0.91x, so it stays.
  static constexpr int64_t kOneAhead = kFarPrefetchBytes;
  // (nibble & 15) | (16 under the mask) in one vpternlogd per vector.
  [[gnu::always_inline]] static void load(const uint8_t* qs, __m512i (&w)[8]) {
    const __m512i sixteen = _mm512_set1_epi8(16), low = _mm512_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(qs + 64 * j);
      const __m512i lo16 = _mm512_maskz_mov_epi8(load_mask(qs + packed_lowbit::kNibbles + 8 * j), sixteen);
      const __m512i hi16 = _mm512_maskz_mov_epi8(load_mask(qs + packed_lowbit::kNibbles + 8 * (j + 4)), sixteen);
      w[j] = _mm512_ternarylogic_epi32(raw, low, lo16, kAndOr);
      w[j + 4] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(raw, 4), low, hi16, kAndOr);
    }
  }
};
using Q5_0W = Q5<16, false>;
using Q5_1W = Q5<1, true>;

// Where the streaming kernels prefetch to, by how long a weight line stays
// in use. One token (decode) passes a line in a few cycles: into L1 (into L2,
// Q8_0 decode runs ~20 % slower). A batch of 8-16 tokens spends ~19 cycles
// per line: into L2, which leaves L1 to the activations (into L1, a
// 16-token Q8_0 GEMM streaming from DRAM runs ~15 % slower).
template <int T>
constexpr auto kPrefetchHint = T >= 8 ? _MM_HINT_T1 : _MM_HINT_T0;

// Prefetches the `bytes` from p + kAhead, a line at a time.
template <auto kHint, int64_t kAhead = kPrefetchBytes>
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead + off, kHint);
}

// Rows of one group (16 outputs per token) against T tokens, all blocks. A
// block's weights stay in 8 registers while the tokens pass in sub-tiles of
// 4 (4 sums, 16 group sums: 29 zmm at T = 16), so a batch of 16 reads
// the matrix once.
template <class W, int T, bool kPrefetch>
void micro(int64_t k, const uint8_t* blk, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  constexpr int kSub = 4;
  // x: this block of token 0; the tokens' blocks follow one another.
  auto act = [&](int t) { return reinterpret_cast<const PackedActBlock*>(x) + t; };
  // The tokens' running totals between groups: here, not in y, whose rows
  // n_out floats apart (8 KiB for 2048) alias in the low 12 address bits,
  // which made each group's loads wait on the other tokens' stores.
  alignas(64) float totals[T][16];
  const int64_t nb = k / kQK32;
  for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
    const int64_t g1 = nb - g0 < kActGroupBlocks ? nb : g0 + kActGroupBlocks;
    // The group's sums over its blocks, weight scales applied.
    __m512 part[T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) part[t] = _mm512_setzero_ps();
    const auto* group_acts = reinterpret_cast<const PackedActBlock*>(x);
    for (int64_t b = g0; b < g1; ++b, blk += W::kBlockBytes, x += xs) {
      if constexpr (kPrefetch)
        prefetch_ahead<kPrefetchHint<T>>(blk, W::kBlockBytes);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
      __m512 dm;
      if constexpr (W::kAffine) dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
      __m512i w[8];
      W::load(blk + W::kQuantAt, w);
      #pragma GCC unroll 4
      for (int t0 = 0; t0 < T; t0 += kSub) {
        constexpr int kMax = kSub;
        __m512i s[kMax];
        #pragma GCC unroll 4
        for (int t = 0; t < kMax; ++t)
          if (t0 + t < T) s[t] = W::kAffine ? _mm512_setzero_si512() : _mm512_set1_epi32(act(t0 + t)->start);
        #pragma GCC unroll 8
        for (int c = 0; c < 8; ++c)
          #pragma GCC unroll 4
          for (int t = 0; t < kMax; ++t)
            if (t0 + t < T) s[t] = dpbusd_bcast(s[t], w[c], act(t0 + t)->qs + 4 * c);
        #pragma GCC unroll 4
        for (int t = 0; t < kMax; ++t)
          if (t0 + t < T) {
            part[t0 + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), dw, part[t0 + t]);
            if constexpr (W::kAffine)  // + m * sum(x), start = -sum(x)
              part[t0 + t] = _mm512_fnmadd_ps(dm, _mm512_set1_ps(static_cast<float>(act(t0 + t)->start)), part[t0 + t]);
          }
      }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 total = g0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(totals[t]);
      _mm512_store_ps(totals[t], _mm512_fmadd_ps(part[t], _mm512_set1_ps(group_acts[t].d), total));
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, _mm512_load_ps(totals[t]));
}

// One block of one token with its weight scales dw, as micro's at T = 1
// but with the 8 vpdpbusd in two chains of 4 (integer sums: the same result).
// Q5_1's mins sit in the scale row's line, which micro_one has already read.
template <class W>
[[gnu::always_inline]] inline void one_block(const uint8_t* blk, const PackedActBlock* a, __m512 dw, __m512& part) {
  __m512i w[8];
  W::load(blk + W::kQuantAt, w);
  __m512i s0 = W::kAffine ? _mm512_setzero_si512() : _mm512_set1_epi32(a->start), s1 = _mm512_setzero_si512();
  #pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    s0 = dpbusd_bcast(s0, w[c], a->qs + 4 * c);
    s1 = dpbusd_bcast(s1, w[c + 4], a->qs + 4 * (c + 4));
  }
  part = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), dw, part);
  if constexpr (W::kAffine) {  // + m * sum(x), start = -sum(x), as in micro
    const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    part = _mm512_fnmadd_ps(dm, _mm512_set1_ps(static_cast<float>(a->start)), part);
  }
}

// micro at one token (decode), the same sums in the same order, but each
// activation group's 8 weight-scale rows (the first line of each block) are
// read before its blocks' quants. A block starts with its scale row, so
// those loads reach 8 blocks ahead within the group, and the stream keeps
// more lines in flight: from DRAM, in-process A/B against micro, Q8_0 +39-49 %
// and Q4_0 +7-32 % (docs/performance.md, 2026-12-05).
template <class W>
void micro_one(int64_t k, const uint8_t* blk, const uint8_t* x, size_t xs, float* y) {
  const int64_t nb = k / kQK32;
  __m512 total = _mm512_setzero_ps();
  for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
    const int64_t n = nb - g0 < kActGroupBlocks ? nb - g0 : kActGroupBlocks;
    const float d = reinterpret_cast<const PackedActBlock*>(x)->d;
    __m512 dw[kActGroupBlocks];
    #pragma GCC unroll 8
    for (int j = 0; j < kActGroupBlocks; ++j)
      if (j < n) dw[j] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + W::kBlockBytes * j)));
    __m512 part = _mm512_setzero_ps();
    #pragma GCC unroll 8
    for (int j = 0; j < kActGroupBlocks; ++j)
      if (j < n) {
        const uint8_t* bj = blk + W::kBlockBytes * j;
        prefetch_ahead<_MM_HINT_T0, W::kOneAhead>(bj, W::kBlockBytes);
        one_block<W>(bj, reinterpret_cast<const PackedActBlock*>(x + j * xs), dw[j], part);
      }
    blk += W::kBlockBytes * n;
    x += xs * static_cast<size_t>(n);
    total = _mm512_fmadd_ps(part, _mm512_set1_ps(d), total);
  }
  _mm512_storeu_ps(y, total);
}

// Q4_K: per super-block (one activation group), the 16 rows' d and dmin
// (f16), the 6-bit scales (16 bytes per sub-block), the 6-bit mins as
// (m_2i, m_2i+1) byte pairs per row, then 32 lines of nibbles: line 8c + q
// holds bytes 4q.. of sub-block 2c in its low halves and of 2c + 1 in its
// high halves. Each sub-block's int32 sums take one convert and one fma by
// d * sc_j into the token's float sum; the mins' term is integer per token:
// 4 vpdpwssd of the rows' (m_2i, m_2i+1) with the token's (S_2i, S_2i+1),
// S_j = -sum(x_j), the start of block 2i (kPairSums), then one fma by dmin
// and one by d_x. Bounds: a sub-block's sum |sum q x| <= 32 * 15 * 127 =
// 60960; |S_j| <= 32 * 127 = 4064, an int16; the mins' sum <= 8 * 63 * 4064
// < 2^21: every integer exact.
struct Q4K {
  static constexpr bool kInt8 = true;
  // 12 chains + 12 float sums + a weight vector (k4_by_sub_block).
  static constexpr int kMaxToks = 12;
  static constexpr int kOffset = kPairSums;
  static constexpr int64_t kScalesAt = 4 * 16, kMinsAt = kScalesAt + 8 * 16;
  static constexpr int64_t kHead = 4 * 16 + 2 * 8 * 16;
  static constexpr int64_t kBlockBytes = kHead + 16 * kQKK / 2;
  static int64_t group_bytes(int64_t k) { return k / kQKK * kBlockBytes; }
};

// acc += the int16 pairs of w . the int16 pair at p broadcast (vpdpwssd).
[[gnu::always_inline]] inline __m512i dpwssd_bcast(__m512i acc, __m512i w, const int32_t* p) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
  return acc;
}

inline __m512 bytes_as_floats(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// Token t's activation block j of the super-block at x.
struct K4Acts {
  const uint8_t* x;
  size_t xs;
  const PackedActBlock* at(int t, int j) const { return reinterpret_cast<const PackedActBlock*>(x + j * xs) + t; }
};

// part[t] += d * sc_j * (sub-block j's sums) for j = 0..7, a pair of
// sub-blocks at a time: each nibble line is loaded and split once and meets
// 2T chains. For few tokens, where T chains would wait on vpdpbusd's latency.
template <int T, bool kPrefetch>
[[gnu::always_inline]] inline void k4_by_pair(const uint8_t* blk, K4Acts a, __m512 d, __m512 (&part)[T], int64_t pf) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    __m512i s[2][T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) s[0][t] = s[1][t] = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const uint8_t* line = blk + Q4K::kHead + (c * 8 + q) * 64;
      if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(line) + pf, kPrefetchHint<T>);
      const __m512i raw = _mm512_loadu_si512(line);
      const __m512i lo = _mm512_and_si512(raw, low);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        s[0][t] = dpbusd_bcast(s[0][t], lo, a.at(t, 2 * c)->qs + 4 * q);
        s[1][t] = dpbusd_bcast(s[1][t], hi, a.at(t, 2 * c + 1)->qs + 4 * q);
      }
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512 ds = _mm512_mul_ps(d, bytes_as_floats(blk + Q4K::kScalesAt + (2 * c + h) * 16));
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) part[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[h][t]), ds, part[t]);
    }
  }
}

// k4_by_pair's sums one sub-block at a time: T chains and T float sums
// where the pairs take 2T + T, so a tile holds 12 tokens instead of 8; each
// line is loaded twice (1 op splits the low nibbles, 2 the high): 3 ops per
// 24 vpdpbusd where the pairs spend 3 per 16. The same sums into part in
// the same order: the same bits.
template <int T, bool kPrefetch>
[[gnu::always_inline]] inline void k4_by_sub_block(const uint8_t* blk, K4Acts a, __m512 d, __m512 (&part)[T], int64_t pf) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  #pragma GCC unroll 2
  for (int j = 0; j < 8; ++j) {
    __m512i s[T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const uint8_t* line = blk + Q4K::kHead + ((j / 2) * 8 + q) * 64;
      if constexpr (kPrefetch)
        if (j % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(line) + pf, kPrefetchHint<T>);
      const __m512i raw = _mm512_loadu_si512(line);
      const __m512i w = j % 2 ? _mm512_and_si512(_mm512_srli_epi16(raw, 4), low) : _mm512_and_si512(raw, low);
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s[t] = dpbusd_bcast(s[t], w, a.at(t, j)->qs + 4 * q);
    }
    const __m512 ds = _mm512_mul_ps(d, bytes_as_floats(blk + Q4K::kScalesAt + j * 16));
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) part[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), ds, part[t]);
  }
}

// The walk by sub-block from 7 tokens on (on L1-resident data, the two
// walks ran within ~2 % of each other at 4-8 tokens; at 12 tokens a tile
// gave ~650 GOP/s where 8 gave ~605): below, the pairs' 2T chains.
template <int T>
constexpr bool kK4BySubBlock = T >= 7;

// kNext: prefetch the next group's weights (the same line one group on)
// instead of this group's kPrefetchBytes ahead, so that a pass over a group
// already in cache brings in the group the next first pass streams.
template <int T, bool kPrefetch, bool kNext = false>
void k4_micro(int64_t k, const uint8_t* blk, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  alignas(64) float totals[T][16];  // as in micro: y's rows alias
  constexpr bool kPf = kPrefetch || kNext;
  const int64_t pf = kNext ? Q4K::group_bytes(k) : kPrefetchBytes;
  for (int64_t b = 0; b < k / kQKK; ++b, blk += Q4K::kBlockBytes, x += 8 * xs) {
    // Prefetches go out one per line as the loads do: a burst of all 37
    // lines of a super-block at once streams ~25 % slower.
    if constexpr (kPf)
      for (int64_t off = 0; off < Q4K::kHead; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + pf + off, kPrefetchHint<T>);
    const K4Acts a{x, xs};
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512 part[T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) part[t] = _mm512_setzero_ps();
    if constexpr (kK4BySubBlock<T>)
      k4_by_sub_block<T, kPf>(blk, a, d, part, pf);
    else
      k4_by_pair<T, kPf>(blk, a, d, part, pf);
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    __m512i mins[4];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      mins[i] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + Q4K::kMinsAt + 32 * i)));
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512i msum = _mm512_setzero_si512();
      #pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) msum = dpwssd_bcast(msum, mins[i], &a.at(t, 2 * i)->start);
      const __m512 v = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(msum), part[t]);
      const __m512 total = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(totals[t]);
      _mm512_store_ps(totals[t], _mm512_fmadd_ps(v, _mm512_set1_ps(a.at(t, 0)->d), total));
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, _mm512_load_ps(totals[t]));
}

// IQ4_XS (packed_lowbit.h): per sub-block of 32, Q4_0's nibble lines looked
// up as IQ4_NL's, the int32 sums from start (offset 128), total += isum *
// ls_j (vpmulld); per super-block (one activation group) one convert and
// two float steps, v = d * total, acc = fma(v, d_x, acc).
template <int T, bool kPrefetch>
void iq4xs_micro(int64_t k, const uint8_t* blk, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  using namespace packed_lowbit;
  const __m512i table = iq4_table();
  alignas(64) float totals[T][16];  // as in micro: y's rows alias
  auto act = [&](int t, int j) { return reinterpret_cast<const PackedActBlock*>(x + j * xs) + t; };
  for (int64_t b = 0; b < k / kQKK; ++b, blk += kIq4XsBytes, x += 8 * xs) {
    if constexpr (kPrefetch)
      prefetch_ahead<kPrefetchHint<T>>(blk, kIq4XsHead);
    __m512i total[T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) total[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* lines = blk + kIq4XsHead + j * kNibbles;
      if constexpr (kPrefetch)
        for (int q = 0; q < 4; ++q)
          _mm_prefetch(reinterpret_cast<const char*>(lines) + kPrefetchBytes + 64 * q, kPrefetchHint<T>);
      __m512i w[8];
      Q4::load(lines, w);
      #pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) w[c] = _mm512_shuffle_epi8(table, w[c]);
      const __m512i ls = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kD + 16 * j)));
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        __m512i s = _mm512_set1_epi32(act(t, j)->start);
        #pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) s = dpbusd_bcast(s, w[c], act(t, j)->qs + 4 * c);
        total[t] = _mm512_add_epi32(total[t], _mm512_mullo_epi32(s, ls));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(total[t]));
      const __m512 sum = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(totals[t]);
      _mm512_store_ps(totals[t], _mm512_fmadd_ps(v, _mm512_set1_ps(act(t, 0)->d), sum));
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, _mm512_load_ps(totals[t]));
}

// Q2_K / Q3_K (packed_lowbit.h): per sub-block of 16, one line of 2-bit
// fields (Q3_K: half of its pair's three lines, q3_levels) as 4 vectors, 4
// vpdpbusd into s (|s| <= 7 * 127 * 16, an int16), then isum += s * sc_j by
// one vpdpwssd with (sc_j, 0) per lane. The offset term per pair of
// sub-blocks: one vpdpwssd of the rows' int16 pairs with the token's
// activation start, which holds the halves' sums (kHalfSums).
template <bool kQ3, int T, bool kPrefetch>
void k_low_micro(int64_t k, const uint8_t* blk, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  using namespace packed_lowbit;
  constexpr int64_t kHead = kQ3 ? kQ3KHead : kQ2KHead, kBytes = kQ3 ? kQ3KBytes : kQ2KBytes;
  constexpr int64_t kPairsAt = kQ3 ? kD : 2 * kD, kPairBytes = kQ3 ? kQ3PairBytes : 2 * 64;
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i low_half = _mm512_set1_epi32(0xFFFF), nibble = _mm512_set1_epi16(0xF);
  alignas(64) float totals[T][16];  // as in micro: y's rows alias
  auto act = [&](int t, int p) { return reinterpret_cast<const PackedActBlock*>(x + p * xs) + t; };
  for (int64_t b = 0; b < k / kQKK; ++b, blk += kBytes, x += 8 * xs) {
    if constexpr (kPrefetch)
      prefetch_ahead<kPrefetchHint<T>>(blk, kHead);
    __m512i isum[T], msum[T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kPairsAt + 32 * p));
      const __m512i pairs = kQ3 ? _mm512_cvtepi8_epi16(raw) : _mm512_cvtepu8_epi16(raw);
      const __m512i sc = kQ3 ? pairs : _mm512_and_si512(pairs, nibble);
      // Q2_K: the mins; Q3_K: -4 * sc, the levels' offset.
      const __m512i off = kQ3 ? _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(pairs, 2))
                              : _mm512_srli_epi16(pairs, 4);
      const __m512i scv[2] = {_mm512_and_si512(sc, low_half), _mm512_srli_epi32(sc, 16)};
      // The pair's quants: Q2_K two lines, Q3_K three.
      const uint8_t* lines = blk + kHead + kPairBytes * p;
      if constexpr (kPrefetch) prefetch_ahead<kPrefetchHint<T>>(lines, kPairBytes);
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512i w[4];
        if constexpr (kQ3) {
          q3_levels(lines, h, w);
        } else {
          const __m512i raw_line = _mm512_loadu_si512(lines + 64 * h);
          #pragma GCC unroll 4
          for (int s = 0; s < 4; ++s)
            w[s] = _mm512_and_si512(s == 0 ? raw_line : _mm512_srli_epi16(raw_line, 2 * s), three);
        }
        #pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          __m512i s = _mm512_setzero_si512();
          #pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) s = dpbusd_bcast(s, w[q], act(t, p)->qs + 16 * h + 4 * q);
          isum[t] = _mm512_dpwssd_epi32(isum[t], s, scv[h]);
        }
      }
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        __m512i& into = kQ3 ? isum[t] : msum[t];
        into = dpwssd_bcast(into, off, &act(t, p)->start);
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512 v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[t]));
      if constexpr (!kQ3) {
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kD)));
        v = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(msum[t]), v);
      }
      const __m512 total = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(totals[t]);
      _mm512_store_ps(totals[t], _mm512_fmadd_ps(v, _mm512_set1_ps(act(t, 0)->d), total));
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, _mm512_load_ps(totals[t]));
}

// k_low_micro<kQ3 = true> at one token (decode), the same integers in
// fewer ops: per pair of sub-blocks, its 8 level vectors (q3_levels) and
// one dpbusd chain per half; the pair's two sums s_2p, s_2p+1 go side by
// side as each row's int16 pair (|s| <= 7 * 127 * 16 fits), so one vpdpwssd
// by the scale pairs as they load; the levels' offset, sum_j -4 sc_j S_j,
// once per super-block from osum = sum_p (sc_2p, sc_2p+1) . (S_2p, S_2p+1).
// Integers all the way (|isum| < 2^23): the same isum, the same bits.
// 301 instructions per super-block where the third bits' masks took 419;
// in-process A/B against that kernel, CPU time, 1.16-1.30x from L2 and
// 1.05-1.12x streaming from DRAM (docs/performance.md, 2026-12-06).
// Prefetch 8 KiB ahead. With the third bits still in masks, in-process A/B
// against the kernel before it, CPU time, 8 KiB 1.18x, 4 KiB 1.15x, 2 KiB
// 0.83x, 1 KiB 0.79x, none 0.76x (docs/performance.md, 2026-12-06). The
// compiler puts a super-block's 29 prefetches in a burst at its start;
// kept beside their loads (volatile asm) they streamed 0.94x.
// Q2_K in the earlier shape measured no better than k_low_micro.
void q3k_one(int64_t k, const uint8_t* blk, const uint8_t* x, size_t xs, float* y) {
  using namespace packed_lowbit;
  __m512 total = _mm512_setzero_ps();
  for (int64_t b = 0; b < k / kQKK; ++b, blk += kQ3KBytes, x += 8 * xs) {
    prefetch_ahead<_MM_HINT_T0, kFarPrefetchBytes>(blk, kQ3KHead);
    __m512i isum = _mm512_setzero_si512(), osum = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const auto* a = reinterpret_cast<const PackedActBlock*>(x + p * xs);
      const uint8_t* lines = blk + kQ3KHead + kQ3PairBytes * p;
      prefetch_ahead<_MM_HINT_T0, kFarPrefetchBytes>(lines, kQ3PairBytes);
      __m512i s[2];
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512i w[4];
        q3_levels(lines, h, w);
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) acc = dpbusd_bcast(acc, w[q], a->qs + 16 * h + 4 * q);
        s[h] = acc;
      }
      const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kD + 32 * p)));
      const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAA, s[0], _mm512_slli_epi32(s[1], 16));
      isum = _mm512_dpwssd_epi32(isum, pair, sc);
      osum = dpwssd_bcast(osum, sc, &a->start);
    }
    isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(osum, 2));  // the levels' offset, -4 each
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 v = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum));
    total = _mm512_fmadd_ps(v, _mm512_set1_ps(reinterpret_cast<const PackedActBlock*>(x)->d), total);
  }
  _mm512_storeu_ps(y, total);
}

// The super-block types beside Q4_K: 8 tokens per micro-kernel.
template <int kOffsetV, int64_t kBytes>
struct SuperBlocks {
  static constexpr bool kInt8 = true;
  static constexpr bool kSuper = true;
  static constexpr int kMaxToks = 8;
  static constexpr int kOffset = kOffsetV;
  static int64_t group_bytes(int64_t k) { return k / kQKK * kBytes; }
};
struct IQ4XS : SuperBlocks<128, packed_lowbit::kIq4XsBytes> {
  template <int T, bool P>
  static void run(int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    iq4xs_micro<T, P>(k, w, x, xs, y, ys);
  }
};
template <bool kQ3>
struct KLow : SuperBlocks<kHalfSums, kQ3 ? packed_lowbit::kQ3KBytes : packed_lowbit::kQ2KBytes> {
  template <int T, bool P>
  static void run(int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    k_low_micro<kQ3, T, P>(k, w, x, xs, y, ys);
  }
  static void one(int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, float* y)
    requires kQ3
  {
    q3k_one(k, w, x, xs, y);
  }
};

// Float weights: 16 rows' element k, widened to f32 by E (vec.h).
template <class E>
struct FloatW {
  static constexpr bool kInt8 = false;
  static constexpr int kMaxToks = 12;  // 24 accumulators (two per token) + weights
  static constexpr int64_t kElemBytes = E::kBytes;
  static int64_t group_bytes(int64_t k) { return k * 16 * kElemBytes; }
  static __m512 load(const uint8_t* p) { return E::load(p); }
};
using F32W = FloatW<vec::F32Elems<vec::Vec512>>;
using F16W = FloatW<vec::F16Elems<vec::Vec512>>;
using BF16W = FloatW<vec::BF16Elems<vec::Vec512>>;

// Two fma chains per (row, token), even and odd k, then their sum: the
// scalar reference lane by lane. One chain would leave decode (one token)
// bound by fma latency (F16 at ~30 GB/s where the read probe gives ~48).
template <class W, int T, bool kPrefetch>
void float_micro(int64_t k, const uint8_t* w, const uint8_t* xb, size_t xs, float* y, int64_t ys) {
  const auto* x = reinterpret_cast<const float*>(xb);
  const size_t xf = xs / sizeof(float);
  __m512 even[T], odd[T];
  #pragma GCC unroll 12
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < k; i += 2, w += 32 * W::kElemBytes) {
    if constexpr (kPrefetch)
      prefetch_ahead<_MM_HINT_T0>(w, 32 * W::kElemBytes);
    const __m512 w0 = W::load(w), w1 = W::load(w + 16 * W::kElemBytes);
    #pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      even[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[t * xf + i]), even[t]);
      odd[t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[t * xf + i + 1]), odd[t]);
    }
  }
  if (i < k) {
    const __m512 w0 = W::load(w);
    #pragma GCC unroll 12
    for (int t = 0; t < T; ++t) even[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[t * xf + i]), even[t]);
  }
  #pragma GCC unroll 12
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, _mm512_add_ps(even[t], odd[t]));
}

// float_micro at one token over two groups (32 rows) at once: four fma
// chains where one group has two, so a one-token pass is not held to the
// fma latency (each row's sums in float_micro's order: the same bits).
template <class W>
void float_two(int64_t k, const uint8_t* w, const uint8_t* w2, const uint8_t* xb, float* y) {
  const auto* x = reinterpret_cast<const float*>(xb);
  __m512 e0 = _mm512_setzero_ps(), o0 = e0, e1 = e0, o1 = e0;
  int64_t i = 0;
  for (; i + 1 < k; i += 2, w += 32 * W::kElemBytes, w2 += 32 * W::kElemBytes) {
    for (int64_t off = 0; off < 32 * W::kElemBytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(w) + kPrefetchBytes + off, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(w2) + kPrefetchBytes + off, _MM_HINT_T0);
    }
    const __m512 xe = _mm512_set1_ps(x[i]), xo = _mm512_set1_ps(x[i + 1]);
    e0 = _mm512_fmadd_ps(W::load(w), xe, e0);
    o0 = _mm512_fmadd_ps(W::load(w + 16 * W::kElemBytes), xo, o0);
    e1 = _mm512_fmadd_ps(W::load(w2), xe, e1);
    o1 = _mm512_fmadd_ps(W::load(w2 + 16 * W::kElemBytes), xo, o1);
  }
  if (i < k) {
    const __m512 xe = _mm512_set1_ps(x[i]);
    e0 = _mm512_fmadd_ps(W::load(w), xe, e0);
    e1 = _mm512_fmadd_ps(W::load(w2), xe, e1);
  }
  _mm512_storeu_ps(y, _mm512_add_ps(e0, o0));
  _mm512_storeu_ps(y + 16, _mm512_add_ps(e1, o1));
}

// One token: the kernels above that stream at the rate decode needs.
// Returns false where the type has none (micro at T = 1 serves).
template <class W>
bool gemm_one(int64_t k, const uint8_t* w, int64_t n_groups, int64_t group_bytes, const uint8_t* x, size_t xs,
              float* y) {
  if constexpr (requires { W::kElemBytes; }) {
    int64_t g = 0;
    for (; g + 2 <= n_groups; g += 2)
      float_two<W>(k, w + g * group_bytes, w + (g + 1) * group_bytes, x, y + g * kPackRows);
    if (g < n_groups) float_micro<W, 1, true>(k, w + g * group_bytes, x, xs, y + g * kPackRows, 0);
    return true;
  } else if constexpr (requires { W::kAffine; }) {
    for (int64_t g = 0; g < n_groups; ++g) micro_one<W>(k, w + g * group_bytes, x, xs, y + g * kPackRows);
    return true;
  } else if constexpr (requires { W::one(k, w, x, xs, y); }) {  // Q3_K
    for (int64_t g = 0; g < n_groups; ++g) W::one(k, w + g * group_bytes, x, xs, y + g * kPackRows);
    return true;
  }
  return false;
}

using MicroFn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*, int64_t);

template <class W, bool kPrefetch, bool kNext = false, int... T>
constexpr std::array<MicroFn, W::kMaxToks> micro_fns(std::integer_sequence<int, T...>) {
  if constexpr (requires { W::kElemBytes; })
    return {&float_micro<W, T + 1, kPrefetch>...};
  else if constexpr (requires { W::kHead; })
    return {&k4_micro<T + 1, kPrefetch, kNext>...};
  else if constexpr (requires { W::kSuper; })
    return {&W::template run<T + 1, kPrefetch>...};
  else
    return {&micro<W, T + 1, kPrefetch>...};
}

// Tokens per tile of a long batch: 16-token tiles made a 512-token Q8_0
// prefill ~10 % slower than 8-token ones (measured; the cause is not pinned
// down: the micro-kernel alone, on L2-resident data, runs both at one rate).
template <class W>
constexpr int tile_toks() {
  if constexpr (requires { W::kTileToks; })
    return W::kTileToks;
  else
    return W::kMaxToks;
}

template <class W>
void gemm(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t xs, int64_t n_tok,
          float* y, int64_t ys) {
  constexpr int kMaxToks = W::kMaxToks;
  static constexpr auto streaming = micro_fns<W, true>(std::make_integer_sequence<int, kMaxToks>());
  static constexpr auto tiled = micro_fns<W, false>(std::make_integer_sequence<int, kMaxToks>());
  const int64_t group_bytes = W::group_bytes(k);
  if (n_tok == 1 && gemm_one<W>(k, w, n_groups, group_bytes, x, xs, y)) return;
  if (n_tok <= kMaxToks) {  // decode and small batches: one pass over the weights
    for (int64_t g = 0; g < n_groups; ++g)
      streaming[n_tok - 1](k, w + g * group_bytes, x, xs, y + g * kPackRows, ys);
    return;
  }
  constexpr int kTile = tile_toks<W>();
  // Bytes of one token's activations, and from one token to the next.
  const size_t tok_bytes = W::kInt8 ? packed_act_row_bytes(k) : xs;
  const size_t tok_step = W::kInt8 ? sizeof(PackedActBlock) : xs;
  if constexpr (requires { W::kHead; }) {
    // Q4_K, whose experts' matrices see ~32 tokens of a 512-token chunk
    // each: tiles of even size, and the second pass over a group (from
    // cache) prefetches the next group, so that the first passes, which
    // streamed a group from memory while computing only one tile, find it
    // in L2 (MoE FFN at 512 tokens: even tiles 0.90-0.99x the time,
    // the prefetch 0.93-0.96x, docs/performance.md).
    static constexpr auto next = micro_fns<W, false, true>(std::make_integer_sequence<int, kMaxToks>());
    for_each_even_tile(n_tok, n_groups, tok_bytes, kTile, [&](int64_t g, int64_t t, int64_t nt, int64_t pass) {
      const auto& fns = pass == 0 ? streaming : pass == 1 ? next : tiled;
      fns[nt - 1](k, w + g * group_bytes, x + t * tok_step, xs, y + t * ys + g * kPackRows, ys);
    });
  } else {
    for_each_tile(n_tok, n_groups, tok_bytes, kTile, [&](int64_t g, int64_t t, int64_t nt) {
      // The first pass over a group brings it from memory: prefetch as
      // decode does (a batch of 16 decoding sequences is bound by that).
      const auto& fns = t == 0 ? streaming : tiled;
      fns[nt - 1](k, w + g * group_bytes, x + t * tok_step, xs, y + t * ys + g * kPackRows, ys);
    });
  }
}

// quantize_packed_act: a group's absmax, then 32 elements in two vectors at
// a time with the same scale (rounded through f16) and the same rounding
// half away from zero.
void quantize(const float* x, uint8_t* out, int64_t k, int offset, size_t block_stride) {
  const __m512 half = _mm512_set1_ps(0.5f);
  const int64_t nb = k / kQK32;
  int32_t even = 0;  // kPairSums: the even block's -sum(q)
  for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
    const int64_t g1 = nb - g0 < kActGroupBlocks ? nb : g0 + kActGroupBlocks;
    __m512 amax = _mm512_setzero_ps();
    for (int64_t i = g0 * kQK32; i < g1 * kQK32; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float d = _mm512_reduce_max_ps(amax) / 127.f;
    const __m512 id = _mm512_set1_ps(d != 0.f ? 1.f / d : 0.f);
    const float dh = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    for (int64_t b = g0; b < g1; ++b) {
      auto& y = *reinterpret_cast<PackedActBlock*>(out + static_cast<size_t>(b) * block_stride);
      __m512i q[2];
      for (int h = 0; h < 2; ++h) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + b * kQK32 + 16 * h), id);
        const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m512 step = _mm512_or_ps(_mm512_set1_ps(1.f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
        q[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs), _mm512_cvtepi32_epi8(q[0]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs + 16), _mm512_cvtepi32_epi8(q[1]));
      y.d = dh;
      if (offset == kPairSums) {
        // Paired as they come: pair_block_sums' second pass over the row's
        // blocks took ~2 % of a Q4_K prefill's samples (this quantizer
        // 0.87-0.93x the time with it, 32 tokens x 2048).
        const int32_t s = -_mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
        if (b % 2 == 0) {
          even = s;
          y.start = pair_start(s, 0);  // the last block of an odd count stays so
        } else {
          y.start = pair_start(even, s);
          reinterpret_cast<PackedActBlock*>(out + static_cast<size_t>(b - 1) * block_stride)->start = y.start;
        }
        continue;
      }
      y.start = offset == kHalfSums ? packed_lowbit::half_sums(_mm512_reduce_add_epi32(q[0]), _mm512_reduce_add_epi32(q[1]))
                                    : -(offset == kPairSums ? 1 : offset) * _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
    }
  }
}

}  // namespace

constexpr PackedTypeKernels kPackedAvx512 = {
    {Q8::kOffset, &gemm<Q8>, &quantize},      {Q4::kOffset, &gemm<Q4>, &quantize},
    {Q4K::kOffset, &gemm<Q4K>, &quantize},    {kFloatActs, &gemm<F32W>, nullptr},
    {kFloatActs, &gemm<F16W>, nullptr},       {kFloatActs, &gemm<BF16W>, nullptr},
    {IQ4NL::kOffset, &gemm<IQ4NL>, &quantize}, {Q5_0W::kOffset, &gemm<Q5_0W>, &quantize},
    {Q5_1W::kOffset, &gemm<Q5_1W>, &quantize}, {IQ4XS::kOffset, &gemm<IQ4XS>, &quantize},
    {kHalfSums, &gemm<KLow<false>>, &quantize}, {kHalfSums, &gemm<KLow<true>>, &quantize},
};

}  // namespace duet
