// Scalar reference dot products of the mix types, and their kernels at every
// CPU level. As in quant_kernels.cc, each sums exact integer products per
// block or sub-block and applies the float scales once per block; the SIMD
// versions compute the same integers.
#include "kernels/quant_mix_kernels.h"

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "kernels/quant_dot.h"

namespace duet {
namespace mix_scalar {
namespace {

// sum over blocks of (sum_i q(w, i) * x.qs[i]) * d_w * d_x + extra(w, x), for
// the 32-element types.
template <class WBlock, class XBlock, class Q, class Extra>
float blocks32_dot(int64_t k, const void* vw, const void* vx, Q q, Extra extra) {
  const auto* w = static_cast<const WBlock*>(vw);
  const auto* x = static_cast<const XBlock*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQK32; ++b) {
    int isum = 0;
    for (int i = 0; i < kQK32; ++i) isum += q(w[b], i) * x[b].qs[i];
    sum += static_cast<float>(isum) * (f16_to_f32(w[b].d) * f16_to_f32(x[b].d)) + extra(w[b], x[b]);
  }
  return sum;
}

// Per 256-element block, block_dot(w, x) as an exact integer times the float
// factor it returns in *scale.
template <class WBlock, class BlockDot>
float blocks256_dot(int64_t k, const void* vw, const void* vx, BlockDot block_dot) {
  const auto* w = static_cast<const WBlock*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) sum += block_dot(w[b], x[b]);
  return sum;
}

int nibble(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

template <class Block>
int level5(const Block& b, int i) {
  const uint32_t bits = static_cast<uint32_t>(b.qh[0]) | static_cast<uint32_t>(b.qh[1]) << 8 |
                        static_cast<uint32_t>(b.qh[2]) << 16 | static_cast<uint32_t>(b.qh[3]) << 24;
  return nibble(b.qs, i) | static_cast<int>(((bits >> i) & 1) << 4);
}

// Element i's 2 bits in the Q2_K/Q3_K/TQ2_0 order.
int level2(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

int trit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto q = static_cast<uint8_t>(byte * kPow3[n]);
  return (q * 3) >> 8;
}

// Trit (0, 1 or 2) of element i of a TQ1_0 block.
int tq1_trit(const BlockTQ1_0& w, int i) {
  if (i < 160) return trit(w.qs[i % 32], i / 32);
  if (i < 240) return trit(w.qs[32 + (i - 160) % 16], (i - 160) / 16);
  return trit(w.qh[(i - 240) % 4], (i - 240) / 4);
}

constexpr auto kNoExtra = [](const auto&, const auto&) { return 0.f; };

}  // namespace

float vec_dot_q5_0_q8_0(int64_t k, const void* vw, const void* vx) {
  return blocks32_dot<BlockQ5_0, BlockQ8_0>(
      k, vw, vx, [](const BlockQ5_0& w, int i) { return level5(w, i) - 16; }, kNoExtra);
}

float vec_dot_q5_1_q8_1(int64_t k, const void* vw, const void* vx) {
  // sum (q*d + m) * xq * dx = d*dx*isum + m * s, where s = dx * sum(xq).
  return blocks32_dot<BlockQ5_1, BlockQ8_1>(
      k, vw, vx, [](const BlockQ5_1& w, int i) { return level5(w, i); },
      [](const BlockQ5_1& w, const BlockQ8_1& x) { return f16_to_f32(w.m) * f16_to_f32(x.s); });
}

float vec_dot_iq4_nl_q8_0(int64_t k, const void* vw, const void* vx) {
  return blocks32_dot<BlockIQ4_NL, BlockQ8_0>(
      k, vw, vx, [](const BlockIQ4_NL& w, int i) { return int{kIq4Levels[nibble(w.qs, i)]}; }, kNoExtra);
}

float vec_dot_q2_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return blocks256_dot<BlockQ2_K>(k, vw, vx, [](const BlockQ2_K& w, const BlockQ8_K& x) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += level2(w.qs, 16 * j + i) * x.qs[16 * j + i];
      isum += (w.scales[j] & 0xF) * s;
      msum += (w.scales[j] >> 4) * x.bsums[j];
    }
    return x.d * f16_to_f32(w.d) * static_cast<float>(isum) - x.d * f16_to_f32(w.dmin) * static_cast<float>(msum);
  });
}

float vec_dot_q3_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return blocks256_dot<BlockQ3_K>(k, vw, vx, [](const BlockQ3_K& w, const BlockQ8_K& x) {
    int8_t sc[16];
    q3_K_scales(w.scales, sc);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * j + i;
        const bool high = (w.hmask[e % 32] >> (4 * (e / 128) + (e / 32) % 4)) & 1;
        s += (level2(w.qs, e) - (high ? 0 : 4)) * x.qs[e];
      }
      isum += sc[j] * s;
    }
    return x.d * f16_to_f32(w.d) * static_cast<float>(isum);
  });
}

float vec_dot_iq4_xs_q8_K(int64_t k, const void* vw, const void* vx) {
  return blocks256_dot<BlockIQ4_XS>(k, vw, vx, [](const BlockIQ4_XS& w, const BlockQ8_K& x) {
    int isum = 0;
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int i = 0; i < 32; ++i) s += kIq4Levels[nibble(w.qs + 16 * j, i)] * x.qs[32 * j + i];
      isum += iq4_xs_scale(w, j) * s;
    }
    return x.d * f16_to_f32(w.d) * static_cast<float>(isum);
  });
}

float vec_dot_tq1_0_q8_K(int64_t k, const void* vw, const void* vx) {
  return blocks256_dot<BlockTQ1_0>(k, vw, vx, [](const BlockTQ1_0& w, const BlockQ8_K& x) {
    int isum = 0;
    for (int i = 0; i < kQKK; ++i) isum += (tq1_trit(w, i) - 1) * x.qs[i];
    return x.d * f16_to_f32(w.d) * static_cast<float>(isum);
  });
}

float vec_dot_tq2_0_q8_K(int64_t k, const void* vw, const void* vx) {
  return blocks256_dot<BlockTQ2_0>(k, vw, vx, [](const BlockTQ2_0& w, const BlockQ8_K& x) {
    int isum = 0;
    for (int i = 0; i < kQKK; ++i) isum += (level2(w.qs, i) - 1) * x.qs[i];
    return x.d * f16_to_f32(w.d) * static_cast<float>(isum);
  });
}

}  // namespace mix_scalar

namespace {

// A type's kernels at one level: its activation format and converter, its
// dot, and its blocked dot (nullptr at the scalar level).
struct Fns {
  DType act;
  void (*from_float)(const float*, void*, int64_t);
  float (*dot)(int64_t, const void*, const void*);
  DotBlockFn block;
};

constexpr TypeKernels kernels_of(const Fns& f, void (*to_float)(const void*, float*, int64_t)) {
  return {f.act, f.from_float, f.dot, to_float, f.block};
}

// The kernels of every mix type at a level, from the level's namespace ns
// (block: ns::dot_block_ or nullptr) and its activation quantizers.
#define DUET_MIX_LEVEL(ns, block, q8_0, q8_1, q8_K)                                                   \
  MixTypeKernels {                                                                                   \
    kernels_of({DType::Q8_0, q8_0, ns::vec_dot_q5_0_q8_0, block(q5_0_q8_0)}, dequantize_row_q5_0),     \
        kernels_of({DType::Q8_1, q8_1, ns::vec_dot_q5_1_q8_1, block(q5_1_q8_1)}, dequantize_row_q5_1), \
        kernels_of({DType::Q8_0, q8_0, ns::vec_dot_iq4_nl_q8_0, block(iq4_nl_q8_0)}, dequantize_row_iq4_nl), \
        kernels_of({DType::Q8_K, q8_K, ns::vec_dot_q2_K_q8_K, block(q2_K_q8_K)}, dequantize_row_q2_K), \
        kernels_of({DType::Q8_K, q8_K, ns::vec_dot_q3_K_q8_K, block(q3_K_q8_K)}, dequantize_row_q3_K), \
        kernels_of({DType::Q8_K, q8_K, ns::vec_dot_iq4_xs_q8_K, block(iq4_xs_q8_K)}, dequantize_row_iq4_xs), \
        kernels_of({DType::Q8_K, q8_K, ns::vec_dot_tq1_0_q8_K, block(tq1_0_q8_K)}, dequantize_row_tq1_0), \
        kernels_of({DType::Q8_K, q8_K, ns::vec_dot_tq2_0_q8_K, block(tq2_0_q8_K)}, dequantize_row_tq2_0), \
        kernels_of({DType::Q8_K, q8_K, ns::vec_dot_iq3_s_q8_K, block(iq3_s_q8_K)}, dequantize_row_iq3_s), \
  }
#define DUET_NO_BLOCK(name) nullptr
#define DUET_AVX2_BLOCK(name) mix_avx2::dot_block_##name
#define DUET_AVX512_BLOCK(name) mix_avx512::dot_block_##name

}  // namespace

constexpr MixTypeKernels kMixScalar =
    DUET_MIX_LEVEL(mix_scalar, DUET_NO_BLOCK, quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K);
// The activation quantizers are AVX2's at both SIMD levels, as for the other types.
constexpr MixTypeKernels kMixAvx2 = DUET_MIX_LEVEL(mix_avx2, DUET_AVX2_BLOCK, quant_avx2::quantize_row_q8_0,
                                                   quant_avx2::quantize_row_q8_1, quant_avx2::quantize_row_q8_K);
constexpr MixTypeKernels kMixAvx512 = DUET_MIX_LEVEL(mix_avx512, DUET_AVX512_BLOCK, quant_avx2::quantize_row_q8_0,
                                                     quant_avx2::quantize_row_q8_1, quant_avx2::quantize_row_q8_K);

#undef DUET_MIX_LEVEL
#undef DUET_NO_BLOCK
#undef DUET_AVX2_BLOCK
#undef DUET_AVX512_BLOCK

}  // namespace duet
