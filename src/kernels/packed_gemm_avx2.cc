// AVX2 kernels of the packed layouts (packed_gemm.h): Q8_0, Q4_0, Q4_K,
// IQ4_NL, Q5_0, Q5_1, IQ4_XS, Q2_K, Q3_K (packed_lowbit.h), and F32, F16,
// BF16.
//
// The layout is AVX-512's (16 rows x 4 bytes per 64-byte chunk); a ymm holds
// half a chunk, 8 rows x 4 bytes, so a micro-kernel runs one 8-row half of
// a group against up to 8 tokens (Q4_K, Q2_K, Q3_K: 4). With 16 ymm
// registers a whole block of 16 rows (16 registers of weights) cannot stay
// resident as in the AVX-512 kernel; a half keeps one integer sum per token
// in a register (Q4_K and the K types: a few more) plus the weights being
// used, the float sums waiting on the stack. The other half re-reads the same
// cache lines from L1/L2, so the matrix still comes from memory once.
// Decode (one token) needs few registers, and both halves run block by
// block in one pass (the micro-kernels' kH = 2): a line is used whole while
// it is in L1, and the lines ahead are prefetched, as in the AVX-512 kernels.
//
// Without vpdpbusd, a u8 x s8 dot is vpmaddubsw (pairs to saturating s16)
// then vpmaddwd by ones (to s32):
//   Q4_0 / Q4_K: nibbles 0..15 times |x| <= 127 give pairs of at most 3810,
//     so 8 of them add in s16 without overflow (30480 < 32767) and one
//     vpmaddwd per block (or sub-block) widens them.
//   Q8_0: the stored u8 (q + 128) times x could reach 2 * 255 * 127 and
//     saturate. The signed q = stored ^ 0x80 is used instead, as |q| (u8
//     <= 128) times x carrying q's sign (|x| <= 127): pairs of at most
//     32512. The sum is then sum(q * x), which is the stored dot plus
//     PackedActBlock::start (-128 * sum(x)); so here the sums start at 0,
//     not at start, and the integer result is the same.
// Every integer sum is exact and the float steps are the reference's fmas in
// its order, so the results equal packed_gemm_reference bit for bit.
#include <immintrin.h>

#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/quant_blocks.h"
#include "kernels/packed_gemm.h"
#include "kernels/packed_lowbit.h"
#include "kernels/token_blocks.h"

namespace duet {
namespace {

constexpr int kSub = 4;     // tokens per micro-kernel call, unless W::kSubToks
constexpr int kHalf = 8;    // rows per ymm

// 4 activation bytes broadcast to every 32-bit lane.
[[gnu::always_inline]] inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

[[gnu::always_inline]] inline __m256i load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 8 f16 at p as f32.
[[gnu::always_inline]] inline __m256 load_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Accumulators of kH halves x T tokens.
template <int kH, int T>
[[gnu::always_inline]] inline void zero(__m256 (&v)[kH][T]) {
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    #pragma GCC unroll 2
    for (int i = 0; i < kH; ++i) v[i][t] = _mm256_setzero_ps();
}

// Token t's half h0 + i of a group's 16 outputs, ys floats from one token's to the next.
template <int kH, int T>
[[gnu::always_inline]] inline void store_halves(const __m256 (&acc)[kH][T], int h0, float* y, int64_t ys) {
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    #pragma GCC unroll 2
    for (int i = 0; i < kH; ++i) _mm256_storeu_ps(y + t * ys + kHalf * (h0 + i), acc[i][t]);
}

// The 32 bits at mask as bytes: byte k is v where bit k is set, else 0.
[[gnu::always_inline]] inline __m256i mask_bytes(const uint8_t* mask, char v) {
  int32_t bits;
  std::memcpy(&bits, mask, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                                3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(v));
}

// The 32-element types: bytes of one block of a group (16 f16 scales, then
// 16 rows of quants). Q5_1 has a second row of 16 f16 (its mins) before the
// quants.
template <int kOffsetV, int64_t kQuantBytes, bool kAffineV = false>
struct Int8Blocks {
  static constexpr int kOffset = kOffsetV;
  static constexpr bool kAffine = kAffineV;
  static constexpr int64_t kQuantAt = kAffine ? 64 : 32;
  static constexpr int64_t kBlockBytes = kQuantAt + 16 * kQuantBytes;
  static constexpr int64_t kElems = kQK32;
  // Tokens a call: each token's integer sum is one register and one chain
  // (the empty asm after each add). Left to itself GCC summed a block's
  // products as a tree and spilled its parts, 40-75 stack accesses per
  // 4-token kernel; with one chain the 8 tokens' sums stay in registers,
  // the float sums (once per block) go to the stack, and each line's
  // unpacking serves 8 tokens. Kernel alone, one thread, 64 tokens, GMAC/s:
  // Q4_0 64 -> 104-127, Q8_0 67 -> 80, IQ4_NL 63 -> 76, Q5_0 63 -> 85.
  static constexpr int kSubToks = 8;
  static int64_t group_bytes(int64_t k) { return k / kQK32 * kBlockBytes; }
};

// s[t] = this block's int32 dot of half h's 8 rows with token t, start included.
struct Q8 : Int8Blocks<128, 32> {
  template <int T>
  [[gnu::always_inline]] static void dot(const uint8_t* qs, int, const PackedActBlock* const (&a)[T], __m256i (&s)[T]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
    // sum(q * x) already is stored . x + start (see the top of the file).
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i q = _mm256_xor_si256(load(qs + 64 * c), flip);
      const __m256i mag = _mm256_abs_epi8(q);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xs = _mm256_sign_epi8(bcast4(a[t]->qs + 4 * c), q);
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, xs), ones));
        asm("" : "+x"(s[t]));  // one chain per token (Int8Blocks::kSubToks)
      }
    }
  }
};

// Nibble line j holds bytes 4j.. of the block in its low halves and 16 + 4j..
// in its high halves.
struct Q4 : Int8Blocks<8, 16> {
  template <int T>
  [[gnu::always_inline]] static void dot(const uint8_t* qs, int, const PackedActBlock* const (&a)[T], __m256i (&s)[T]) {
    const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256i p[T];  // s16 pair sums: 8 of at most 3810 each
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = load(qs + 64 * j);
      const __m256i lo = _mm256_and_si256(raw, low), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(lo, bcast4(a[t]->qs + 4 * j)));
        asm("" : "+x"(p[t]));  // one chain per token (Int8Blocks::kSubToks)
        p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(hi, bcast4(a[t]->qs + 16 + 4 * j)));
        asm("" : "+x"(p[t]));
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm256_add_epi32(_mm256_madd_epi16(p[t], ones), _mm256_set1_epi32(a[t]->start));
  }
};

// s[t] += sum(level * x) over one 32-element block of 8 rows (4 nibble
// lines from qs) looked up in IQ4_NL's levels, with token t: the sign trick's
// pair sums (<= 2 * 127 * 127) widened by vpmaddwd with `widen` (ones, or
// IQ4_XS's (ls, ls) per row). Each token's sum is one chain (the empty asm):
// left to itself GCC added the products as a tree and spilled its parts.
template <int T>
[[gnu::always_inline]] inline void iq4_dot(const uint8_t* qs, const PackedActBlock* const (&a)[T], __m256i table,
                                           __m256i widen, __m256i (&s)[T]) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  #pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m256i raw = load(qs + 64 * j);
    const __m256i q[2] = {_mm256_shuffle_epi8(table, _mm256_and_si256(raw, low)),
                          _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(raw, 4), low))};
    #pragma GCC unroll 2
    for (int e = 0; e < 2; ++e) {
      if constexpr (T == 1) {
        // One token: |x| is the unsigned side and the levels take x's
        // sign (levels >= -127 negate within s8), so |x| is shared by both
        // halves of decode's pass where |level| was one op per half.
        const __m256i x = bcast4(a[0]->qs + 16 * e + 4 * j);
        s[0] = _mm256_add_epi32(
            s[0], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(q[e], x)), widen));
        asm("" : "+x"(s[0]));
        continue;
      }
      const __m256i mag = _mm256_abs_epi8(q[e]);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xs = _mm256_sign_epi8(bcast4(a[t]->qs + 16 * e + 4 * j), q[e]);
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, xs), widen));
        asm("" : "+x"(s[t]));  // one chain per token (Int8Blocks::kSubToks)
      }
    }
  }
}

// IQ4_NL (packed_lowbit.h): Q4_0's nibble lines hold indices, looked up
// (vpshufb) as the signed levels, then Q8_0's sign trick: |level| <= 127, so
// pairs stay <= 32258; the sums start at 0, sum(level * x) being the stored
// (level + 128) . x + start.
struct IQ4NL : Int8Blocks<128, 16> {
  template <int T>
  [[gnu::always_inline]] static void dot(const uint8_t* qs, int, const PackedActBlock* const (&a)[T], __m256i (&s)[T]) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels)));
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
    iq4_dot<T>(qs, a, table, _mm256_set1_epi16(1), s);
  }
};

// Q5_0 / Q5_1 (packed_lowbit.h): Q4_0's nibbles plus the fifth bits, half
// h's 32 bits of each 64-bit mask widened to bytes (byte k gets bit k).
// Levels 0..31 give pairs <= 7874, so 4 add in s16 before vpmaddwd widens
// them (8 tokens a call: the low elements' sums wait on the stack while the
// high ones' pairs fill the registers). Q5_1's sums start at 0: its mins'
// term, m * sum(x), comes apart.
template <int kOffsetV, bool kAffineV>
struct Q5 : Int8Blocks<kOffsetV, 20, kAffineV> {
  template <int T>
  [[gnu::always_inline]] static void dot(const uint8_t* qs, int h, const PackedActBlock* const (&a)[T], __m256i (&s)[T]) {
    const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    // qs is the block's nibbles + 32h; mask c's half h at nibbles + 256 + 8c + 4h.
    const uint8_t* masks = qs - 4 * kHalf * h + packed_lowbit::kNibbles + 4 * h;
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = kAffineV ? _mm256_setzero_si256() : _mm256_set1_epi32(a[t]->start);
    #pragma GCC unroll 2
    for (int e = 0; e < 2; ++e) {  // low nibbles (elements 0..15), then high (16..31)
      __m256i p[T];
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i raw = load(qs + 64 * j);
        const __m256i nib = _mm256_and_si256(e == 0 ? raw : _mm256_srli_epi16(raw, 4), low);
        const __m256i u = _mm256_or_si256(nib, mask_bytes(masks + 8 * (4 * e + j), 16));
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(u, bcast4(a[t]->qs + 16 * e + 4 * j)));
          asm("" : "+x"(p[t]));  // one chain per token (Int8Blocks::kSubToks)
        }
      }
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p[t], ones));
        asm("" : "+x"(s[t]));
      }
    }
  }
};
using Q5_0W = Q5<16, false>;
using Q5_1W = Q5<1, true>;

// Where the one-token kernels prefetch to: as far as the AVX-512 ones.
constexpr int64_t kPrefetchBytes = 4096;

// kH halves of a group from half h0 (rows 8h0..8(h0 + kH) - 1) against T
// tokens, all blocks: per block part = fma(isum, d_w, part) (Q5_1: then
// part -= d_m * start, start = -sum(x)); per activation group acc =
// fma(part, d_x, acc). Batches run one half at a time (kH = 1: 8 tokens'
// sums fit the registers); decode runs both in one pass (kH = 2, T = 1), so
// a line is used whole while it is in L1, with the lines ahead prefetched.
// Each lane's operations and order do not depend on kH.
template <class W, int T, int kH = 1>
void half_micro(int64_t k, const uint8_t* blk, int h0, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  const int64_t nb = k / kQK32;
  __m256 acc[kH][T];
  zero(acc);
  for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
    const int64_t g1 = nb - g0 < kActGroupBlocks ? nb : g0 + kActGroupBlocks;
    const auto* group_acts = reinterpret_cast<const PackedActBlock*>(x);
    __m256 part[kH][T];
    zero(part);
    for (int64_t b = g0; b < g1; ++b, blk += W::kBlockBytes, x += xs) {
      if constexpr (kH == 2)
        for (int64_t off = 0; off < W::kBlockBytes; off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + off, _MM_HINT_T0);
      const PackedActBlock* a[T];
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const PackedActBlock*>(x) + t;
      #pragma GCC unroll 2
      for (int i = 0; i < kH; ++i) {
        const int h = h0 + i;
        __m256i s[T];
        W::template dot<T>(blk + W::kQuantAt + 4 * kHalf * h, h, a, s);
        const __m256 dw = load_f16(blk + 2 * kHalf * h);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          part[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), dw, part[i][t]);
          if constexpr (W::kAffine)
            part[i][t] = _mm256_fnmadd_ps(load_f16(blk + 32 + 2 * kHalf * h),
                                          _mm256_set1_ps(static_cast<float>(a[t]->start)), part[i][t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < kH; ++i) acc[i][t] = _mm256_fmadd_ps(part[i][t], _mm256_set1_ps(group_acts[t].d), acc[i][t]);
  }
  store_halves(acc, h0, y, ys);
}

// Q4_K, per 256-element super-block (one activation group): sub-block j's
// int32 dot (nibbles x activations, without start) scaled by d * sc_j into
// part; the mins' term as integers, msum = sum_j m_j * S_j, by vpmaddwd
// of the rows' (m_2i, m_2i+1) int16 pairs with the token's (S_2i, S_2i+1),
// block 2i's start (kPairSums); then acc = fma(fma(dmin, msum, part), d_x, acc).
struct Q4K {
  static constexpr int kOffset = kPairSums;
  static constexpr int64_t kHead = 4 * 16 + 2 * 8 * 16;
  static constexpr int64_t kBlockBytes = kHead + 16 * kQKK / 2;
  static int64_t group_bytes(int64_t k) { return k / kQKK * kBlockBytes; }
};

// kH halves from h0 against T tokens, as half_micro's kH. 4 tokens a call:
// each holds two s16 chains (pinned as Int8Blocks' sums; as a tree GCC
// spilled them, 139 stack accesses, 72 against 113 GMAC/s alone).
template <int T, int kH = 1>
void k4_half_micro(int64_t k, const uint8_t* blk, int h0, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  auto act = [&](int t, int j) { return reinterpret_cast<const PackedActBlock*>(x + j * xs) + t; };
  __m256 acc[kH][T];
  zero(acc);
  for (int64_t b = 0; b < k / kQKK; ++b, blk += Q4K::kBlockBytes, x += 8 * xs) {
    __m256 part[kH][T];
    zero(part);
    for (int c = 0; c < 4; ++c) {
      __m256i p[2][kH][T];  // s16 pair sums of sub-blocks 2c and 2c + 1: 8 of at most 3810
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < kH; ++i) p[0][i][t] = p[1][i][t] = _mm256_setzero_si256();
      #pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        const uint8_t* line = blk + Q4K::kHead + (c * 8 + q) * 64;
        if constexpr (kH == 2) _mm_prefetch(reinterpret_cast<const char*>(line) + kPrefetchBytes, _MM_HINT_T0);
        __m256i lo[kH], hi[kH];
        #pragma GCC unroll 2
        for (int i = 0; i < kH; ++i) {
          const __m256i raw = load(line + 4 * kHalf * (h0 + i));
          lo[i] = _mm256_and_si256(raw, low);
          hi[i] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
        }
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i a0 = bcast4(act(t, 2 * c)->qs + 4 * q), a1 = bcast4(act(t, 2 * c + 1)->qs + 4 * q);
          #pragma GCC unroll 2
          for (int i = 0; i < kH; ++i) {
            p[0][i][t] = _mm256_add_epi16(p[0][i][t], _mm256_maddubs_epi16(lo[i], a0));
            p[1][i][t] = _mm256_add_epi16(p[1][i][t], _mm256_maddubs_epi16(hi[i], a1));
            asm("" : "+x"(p[0][i][t]), "+x"(p[1][i][t]));
          }
        }
      }
      #pragma GCC unroll 2
      for (int e = 0; e < 2; ++e)
        #pragma GCC unroll 2
        for (int i = 0; i < kH; ++i) {
          const int h = h0 + i;
          const uint8_t* sc = blk + 64 + (2 * c + e) * 16 + kHalf * h;
          const __m256 sc_f =
              _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
          const __m256 ds = _mm256_mul_ps(load_f16(blk + 2 * kHalf * h), sc_f);  // exact: 11-bit d times 6-bit sc
          #pragma GCC unroll 4
          for (int t = 0; t < T; ++t)
            part[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p[e][i][t], ones)), ds, part[i][t]);
        }
    }
    if constexpr (kH == 2)
      for (int64_t off = 0; off < Q4K::kHead; off += 64)  // the next head
        _mm_prefetch(reinterpret_cast<const char*>(blk) + Q4K::kBlockBytes + off, _MM_HINT_T0);
    #pragma GCC unroll 2
    for (int i = 0; i < kH; ++i) {
      const int h = h0 + i;
      const __m256 dmin = load_f16(blk + 32 + 2 * kHalf * h);
      __m256i mins[4];  // pair i: rows' (m_2i, m_2i+1) as int16
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        mins[j] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 128 + 32 * j + 2 * kHalf * h)));
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256i msum = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j)
          msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins[j], _mm256_set1_epi32(act(t, 2 * j)->start)));
        const __m256 v = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), part[i][t]);
        acc[i][t] = _mm256_fmadd_ps(v, _mm256_set1_ps(act(t, 0)->d), acc[i][t]);
      }
    }
  }
  store_halves(acc, h0, y, ys);
}

// IQ4_XS (packed_lowbit.h), per 256-element super-block (one activation
// group), all in int32: sub-block j's lines are IQ4_NL's, whose sign-trick
// pair sums (<= 32258) go through vpmaddwd by each row's (ls_j, ls_j), so
// total += ls_j * sum(level * x) costs what IQ4_NL's widening by ones does
// (products <= 32 * 32258 per half lane). Then v = d * float(total) and
// acc = fma(v, d_x, acc), the reference's steps. kH as half_micro's.
template <int T, int kH = 1>
void iq4xs_half_micro(int64_t k, const uint8_t* blk, int h0, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  using namespace packed_lowbit;
  // vpshufb pattern copying each lane's low int16 into both halves.
  const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                          0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels)));
  auto act = [&](int t, int j) { return reinterpret_cast<const PackedActBlock*>(x + j * xs) + t; };
  __m256 acc[kH][T];
  zero(acc);
  for (int64_t b = 0; b < k / kQKK; ++b, blk += kIq4XsBytes, x += 8 * xs) {
    __m256i total[kH][T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      #pragma GCC unroll 2
      for (int i = 0; i < kH; ++i) total[i][t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* lines = blk + kIq4XsHead + j * kNibbles;
      if constexpr (kH == 2)
        for (int q = 0; q < 4; ++q)
          _mm_prefetch(reinterpret_cast<const char*>(lines) + kPrefetchBytes + 64 * q, _MM_HINT_T0);
      const PackedActBlock* a[T];
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) a[t] = act(t, j);
      #pragma GCC unroll 2
      for (int i = 0; i < kH; ++i) {
        const int h = h0 + i;
        const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + kD + 16 * j + kHalf * h));
        const __m256i ls = _mm256_shuffle_epi8(_mm256_cvtepi8_epi32(raw), dup_lo);
        iq4_dot<T>(lines + 4 * kHalf * h, a, table, ls, total[i]);
      }
    }
    #pragma GCC unroll 2
    for (int i = 0; i < kH; ++i) {
      const __m256 d = load_f16(blk + 2 * kHalf * (h0 + i));
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[i][t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(total[i][t])), _mm256_set1_ps(act(t, 0)->d),
                                    acc[i][t]);
    }
  }
  store_halves(acc, h0, y, ys);
}

// Q3_K's level vectors of half e of a pair of sub-blocks (packed_lowbit.h),
// rows of half h: w[f] meets activation bytes 16e + 4f...
[[gnu::always_inline]] inline void q3_levels(const uint8_t* lines, int h, int e, __m256i (&w)[4]) {
  const __m256i seven = _mm256_set1_epi8(7), three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  const uint8_t* half = lines + 4 * kHalf * h;
  const __m256i a = load(half), b = load(half + 64);
  if (e == 0) {
    w[0] = _mm256_and_si256(a, seven);
    w[1] = _mm256_and_si256(_mm256_srli_epi16(a, 3), seven);
    w[2] = _mm256_and_si256(b, seven);
    w[3] = _mm256_and_si256(_mm256_srli_epi16(b, 3), seven);
    return;
  }
  const __m256i c = load(half + 128);
  w[0] = _mm256_and_si256(c, seven);
  w[1] = _mm256_and_si256(_mm256_srli_epi16(c, 3), seven);
  // a's (b's) top 2 bits, c's bit 6 (7) as the third.
  w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 6), three),
                         _mm256_and_si256(_mm256_srli_epi16(c, 4), four));
  w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 6), three),
                         _mm256_and_si256(_mm256_srli_epi16(c, 5), four));
}

// Q2_K / Q3_K (packed_lowbit.h), per 256-element super-block (one
// activation group), all in int32: per sub-block j of 16, the 2-bit fields
// of its line as 4 vectors (Q3_K: its half of the pair's levels), 4
// vpmaddubsw into s16 pairs (at most 4 x 2 x 7 x 127 = 7112), and isum +=
// pairs . (sc_j, sc_j) by one vpmaddwd, which widens and scales at once.
// The offset term per pair of sub-blocks is one vpmaddwd of the rows'
// (c_2p, c_2p+1) int16 pairs with the token's half sums (kHalfSums): Q2_K's
// mins into msum, Q3_K's -4 * sc into isum. Then v = d * float(isum) (Q2_K:
// v = fma(-dmin, float(msum), v)) and acc = fma(v, d_x, acc), the
// reference's steps. kH as half_micro's.
template <bool kQ3, int T, int kH = 1>
void k_low_half_micro(int64_t k, const uint8_t* blk, int h0, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  using namespace packed_lowbit;
  constexpr int64_t kHead = kQ3 ? kQ3KHead : kQ2KHead, kBytes = kQ3 ? kQ3KBytes : kQ2KBytes;
  constexpr int64_t kPairsAt = kQ3 ? kD : 2 * kD, kPairBytes = kQ3 ? kQ3PairBytes : 2 * 64;
  const __m256i three = _mm256_set1_epi8(3), nibble = _mm256_set1_epi16(0xF);
  // vpshufb patterns copying each lane's low (high) int16 into both halves.
  const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                          0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i dup_hi = _mm256_add_epi8(dup_lo, _mm256_set1_epi8(2));
  auto act = [&](int t, int p) { return reinterpret_cast<const PackedActBlock*>(x + p * xs) + t; };
  __m256 acc[kH][T];
  zero(acc);
  for (int64_t b = 0; b < k / kQKK; ++b, blk += kBytes, x += 8 * xs) {
    if constexpr (kH == 2)
      for (int64_t off = 0; off < kHead; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + off, _MM_HINT_T0);
    #pragma GCC unroll 2
    for (int i = 0; i < kH; ++i) {
      const int h = h0 + i;
      __m256i isum[T], msum[T];
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
      for (int p = 0; p < 8; ++p) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kPairsAt + 32 * p + 16 * h));
        const __m256i pairs = kQ3 ? _mm256_cvtepi8_epi16(raw) : _mm256_cvtepu8_epi16(raw);
        const __m256i sc = kQ3 ? pairs : _mm256_and_si256(pairs, nibble);
        // Q2_K: the mins; Q3_K: -4 * sc, the levels' offset.
        const __m256i off = kQ3 ? _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(pairs, 2))
                                : _mm256_srli_epi16(pairs, 4);
        const uint8_t* lines = blk + kHead + kPairBytes * p;
        if constexpr (kH == 2)
          if (i == 0)
            for (int64_t off = 0; off < kPairBytes; off += 64)
              _mm_prefetch(reinterpret_cast<const char*>(lines) + kPrefetchBytes + off, _MM_HINT_T0);
        #pragma GCC unroll 2
        for (int e = 0; e < 2; ++e) {
          __m256i w[4];
          if constexpr (kQ3) {
            q3_levels(lines, h, e, w);
          } else {
            const __m256i raw_line = load(lines + 64 * e + 4 * kHalf * h);
            #pragma GCC unroll 4
            for (int f = 0; f < 4; ++f)
              w[f] = _mm256_and_si256(f == 0 ? raw_line : _mm256_srli_epi16(raw_line, 2 * f), three);
          }
          const __m256i scv = _mm256_shuffle_epi8(sc, e == 0 ? dup_lo : dup_hi);
          #pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            __m256i s16 = _mm256_maddubs_epi16(w[0], bcast4(act(t, p)->qs + 16 * e));
            #pragma GCC unroll 3
            for (int f = 1; f < 4; ++f)
              s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[f], bcast4(act(t, p)->qs + 16 * e + 4 * f)));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16, scv));
          }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          __m256i& into = kQ3 ? isum[t] : msum[t];
          into = _mm256_add_epi32(into, _mm256_madd_epi16(off, _mm256_set1_epi32(act(t, p)->start)));
        }
      }
      const __m256 d = load_f16(blk + 2 * kHalf * h);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256 v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[t]));
        if constexpr (!kQ3) v = _mm256_fnmadd_ps(load_f16(blk + kD + 2 * kHalf * h), _mm256_cvtepi32_ps(msum[t]), v);
        acc[i][t] = _mm256_fmadd_ps(v, _mm256_set1_ps(act(t, 0)->d), acc[i][t]);
      }
    }
  }
  store_halves(acc, h0, y, ys);
}

template <bool kQ3>
struct KLow {
  static constexpr int kOffset = kHalfSums;
  static int64_t group_bytes(int64_t k) {
    return k / kQKK * (kQ3 ? packed_lowbit::kQ3KBytes : packed_lowbit::kQ2KBytes);
  }
};

// IQ4_XS runs 8 tokens a call, as the 32-element types: with its scales in
// the integer sums a token holds one register (its float total waits on the
// stack between super-blocks), so 8 fit beside the looked-up levels, and
// each line's unpacking (and, shift, 2 lookups, 2 abs) serves 8 tokens
// (kernel alone, one thread: 74-77 -> 77-82 GMAC/s).
struct IQ4XS {
  static constexpr int kOffset = 128;
  static constexpr int kSubToks = 8;
  static int64_t group_bytes(int64_t k) { return k / kQKK * packed_lowbit::kIq4XsBytes; }
};

using HalfFn = void (*)(int64_t, const uint8_t*, int, const uint8_t*, size_t, float*, int64_t);

// W's micro-kernel: kH halves of a group from half h0 against T tokens.
template <class W, int T, int kH = 1>
void micro(int64_t k, const uint8_t* blk, int h0, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  if constexpr (std::is_same_v<W, Q4K>)
    k4_half_micro<T, kH>(k, blk, h0, x, xs, y, ys);
  else if constexpr (std::is_same_v<W, IQ4XS>)
    iq4xs_half_micro<T, kH>(k, blk, h0, x, xs, y, ys);
  else if constexpr (std::is_same_v<W, KLow<false>> || std::is_same_v<W, KLow<true>>)
    k_low_half_micro<std::is_same_v<W, KLow<true>>, T, kH>(k, blk, h0, x, xs, y, ys);
  else
    half_micro<W, T, kH>(k, blk, h0, x, xs, y, ys);
}

// Tokens per micro-kernel call: kSub, or W's kSubToks.
template <class W>
constexpr int sub_of() {
  if constexpr (requires { W::kSubToks; })
    return W::kSubToks;
  else
    return kSub;
}

template <class W, int... T>
constexpr std::array<HalfFn, sizeof...(T)> half_fns(std::integer_sequence<int, T...>) {
  return {&micro<W, T + 1>...};
}

// One group's 16 rows against tokens [t, t_end): each half, sub_of<W>() tokens at a time.
template <class W>
void group_tokens(int64_t k, const uint8_t* gw, const uint8_t* x, size_t xs, size_t tok_step, int64_t n_tok,
                  float* y, int64_t ys) {
  constexpr int kS = sub_of<W>();
  static constexpr auto fns = half_fns<W>(std::make_integer_sequence<int, kS>());
  for (int h = 0; h < 2; ++h)
    for (int64_t t = 0; t < n_tok; t += kS) {
      const int64_t nt = n_tok - t < kS ? n_tok - t : kS;
      fns[nt - 1](k, gw, h, x + t * tok_step, xs, y + t * ys, ys);
    }
}

template <class W>
void gemm(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t xs, int64_t n_tok, float* y,
          int64_t ys) {
  const int64_t group_bytes = W::group_bytes(k);
  if (n_tok == 1) {  // decode: both halves of each group in one pass
    for (int64_t g = 0; g < n_groups; ++g) micro<W, 1, 2>(k, w + g * group_bytes, 0, x, xs, y + g * kPackRows, 0);
    return;
  }
  constexpr size_t kStep = sizeof(PackedActBlock);  // from one token's block to the next
  // Each group runs both its halves over a whole block (group_tokens).
  const int64_t tok_block = tokens_per_block(packed_act_row_bytes(k), sub_of<W>());
  for (int64_t t0 = 0; t0 < n_tok; t0 += tok_block) {
    const int64_t nt = n_tok - t0 < tok_block ? n_tok - t0 : tok_block;
    for (int64_t g = 0; g < n_groups; ++g)
      group_tokens<W>(k, w + g * group_bytes, x + t0 * kStep, xs, kStep, nt, y + t0 * ys + g * kPackRows, ys);
  }
}

// Float weights (F32, F16, BF16): per element k the group's 16 rows side by
// side, a ymm holding one 8-row half. As the AVX-512 kernel and the
// reference, two fma chains per (row, token), even and odd k, then their
// sum. The two chains never meet until that sum, so prefill runs them one
// after the other: with one chain's accumulators live, a 16-row x 6-token
// tile fits the 16 ymm registers (12 accumulators, the two halves' weights,
// one broadcast), each converted weight serves 6 tokens and each broadcast
// 16 rows. (Both chains at once, 12 accumulators held 8 rows x 6 tokens:
// one broadcast per fma.) The chains advance kFloatChunk elements of k at a
// time, their sums parked on the stack between chunks (exact), so a chunk's
// weights and activations are read twice from L1, not from L2.
constexpr int kFloatSub = 6;
constexpr int64_t kFloatChunk = 256;
constexpr int64_t kFloatPrefetchBytes = 4096;

template <int64_t kBytes>
struct FloatElems {
  static constexpr int64_t kElemBytes = kBytes;
  static __m256 load(const uint8_t* p) {
    if constexpr (kBytes == 4) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    else return load_f16(p);
  }
};
struct BF16Elems {
  static constexpr int64_t kElemBytes = 2;
  static __m256 load(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

// One chain (k = i0, i0 + 2, ... < i1) of a group's 16 rows against T
// tokens, continuing from the sums in `sums` ([half][token] vectors) and
// leaving them there.
template <class E, int T>
[[gnu::always_inline]] inline void float_chain(int64_t i0, int64_t i1, const uint8_t* w, const float* x, size_t xf,
                                               __m256 (&sums)[2][T]) {
  constexpr int64_t kRow = kPackRows * E::kElemBytes;  // one k's 16 rows
  constexpr int64_t kHalfBytes = kHalf * E::kElemBytes;
  __m256 acc[2][T];
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    #pragma GCC unroll 6
    for (int t = 0; t < T; ++t) acc[h][t] = sums[h][t];
  w += i0 * kRow;
  for (int64_t i = i0; i < i1; i += 2, w += 2 * kRow) {
    const __m256 w0 = E::load(w), w1 = E::load(w + kHalfBytes);
    #pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x + t * xf + i);
      acc[0][t] = _mm256_fmadd_ps(w0, xb, acc[0][t]);
      acc[1][t] = _mm256_fmadd_ps(w1, xb, acc[1][t]);
    }
  }
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    #pragma GCC unroll 6
    for (int t = 0; t < T; ++t) sums[h][t] = acc[h][t];
}

// A group's 16 rows against T tokens, both chains, chunk by chunk of k.
template <class E, int T>
void float_tile(int64_t k, const uint8_t* w, const float* x, size_t xf, float* y, int64_t ys) {
  __m256 sums[2][2][T];  // [even, odd][half][token]
  #pragma GCC unroll 2
  for (int c = 0; c < 2; ++c)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
      #pragma GCC unroll 6
      for (int t = 0; t < T; ++t) sums[c][h][t] = _mm256_setzero_ps();
  for (int64_t i0 = 0; i0 < k; i0 += kFloatChunk) {
    const int64_t i1 = k - i0 < kFloatChunk ? k : i0 + kFloatChunk;
    float_chain<E, T>(i0, i1, w, x, xf, sums[0]);
    float_chain<E, T>(i0 + 1, i1, w, x, xf, sums[1]);
  }
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    #pragma GCC unroll 6
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ys + kHalf * h, _mm256_add_ps(sums[0][h][t], sums[1][h][t]));
}

// Decode (one or two tokens): both halves in one pass, so the group streams
// from memory once, prefetched ahead, instead of once per half.
template <class E, int T>
void float_group_micro(int64_t k, const uint8_t* w, const float* x, size_t xf, float* y, int64_t ys) {
  constexpr int64_t kRow = kPackRows * E::kElemBytes;
  constexpr int64_t kHalfBytes = kHalf * E::kElemBytes;
  __m256 even[2][T], odd[2][T];
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    #pragma GCC unroll 2
    for (int t = 0; t < T; ++t) even[h][t] = odd[h][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < k; i += 2, w += 2 * kRow) {
    #pragma GCC unroll 2
    for (int64_t off = 0; off < 2 * kRow; off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(w) + kFloatPrefetchBytes + off, _MM_HINT_T0);
    const __m256 w0[2] = {E::load(w), E::load(w + kHalfBytes)};
    const __m256 w1[2] = {E::load(w + kRow), E::load(w + kRow + kHalfBytes)};
    #pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      const __m256 xe = _mm256_broadcast_ss(x + t * xf + i), xo = _mm256_broadcast_ss(x + t * xf + i + 1);
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        even[h][t] = _mm256_fmadd_ps(w0[h], xe, even[h][t]);
        odd[h][t] = _mm256_fmadd_ps(w1[h], xo, odd[h][t]);
      }
    }
  }
  if (i < k)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < 2; ++h)
        even[h][t] = _mm256_fmadd_ps(E::load(w + kHalfBytes * h), _mm256_broadcast_ss(x + t * xf + i), even[h][t]);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + t * ys + kHalf * h, _mm256_add_ps(even[h][t], odd[h][t]));
}

using FloatTileFn = void (*)(int64_t, const uint8_t*, const float*, size_t, float*, int64_t);

template <class E, int... T>
constexpr std::array<FloatTileFn, kFloatSub> float_tile_fns(std::integer_sequence<int, T...>) {
  return {&float_tile<E, T + 1>...};
}

// As gemm() for the int8 types: tokens in blocks whose activations stay in
// L2, each group against kFloatSub tokens at a time. x holds each
// token's k floats, xs bytes apart.
template <class E>
void float_gemm(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* xb, size_t xs, int64_t n_tok,
                float* y, int64_t ys) {
  static constexpr auto fns = float_tile_fns<E>(std::make_integer_sequence<int, kFloatSub>());
  const auto* x = reinterpret_cast<const float*>(xb);
  const size_t xf = xs / sizeof(float);
  const int64_t group_bytes = k * kPackRows * E::kElemBytes;
  if (n_tok <= 2) {
    for (int64_t g = 0; g < n_groups; ++g)
      (n_tok == 1 ? float_group_micro<E, 1> : float_group_micro<E, 2>)(k, w + g * group_bytes, x, xf,
                                                                        y + g * kPackRows, ys);
    return;
  }
  for_each_tile(n_tok, n_groups, xs, kFloatSub, [&](int64_t g, int64_t t, int64_t nt) {
    fns[nt - 1](k, w + g * group_bytes, x + t * xf, xf, y + t * ys + g * kPackRows, ys);
  });
}

}  // namespace

// Activations go through the scalar quantize_packed_act, which is the
// definition (exact) and costs O(m * k) beside the O(m * k * n) GEMM.
constexpr PackedTypeKernels kPackedAvx2 = {
    {Q8::kOffset, &gemm<Q8>, &quantize_packed_act},
    {Q4::kOffset, &gemm<Q4>, &quantize_packed_act},
    {Q4K::kOffset, &gemm<Q4K>, &quantize_packed_act},
    {kFloatActs, &float_gemm<FloatElems<4>>, nullptr},
    {kFloatActs, &float_gemm<FloatElems<2>>, nullptr},
    {kFloatActs, &float_gemm<BF16Elems>, nullptr},
    {IQ4NL::kOffset, &gemm<IQ4NL>, &quantize_packed_act},
    {Q5_0W::kOffset, &gemm<Q5_0W>, &quantize_packed_act},
    {Q5_1W::kOffset, &gemm<Q5_1W>, &quantize_packed_act},
    {IQ4XS::kOffset, &gemm<IQ4XS>, &quantize_packed_act},
    {kHalfSums, &gemm<KLow<false>>, &quantize_packed_act},
    {kHalfSums, &gemm<KLow<true>>, &quantize_packed_act},
};

}  // namespace duet
