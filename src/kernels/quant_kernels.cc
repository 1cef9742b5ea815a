// Scalar reference dot products of the quantized types, and the kernels of
// every CPU level by type. Each dot product sums exact integer products
// within a block (or sub-block) and applies the float scales once per block,
// as ggml does; the SIMD versions compute the same integers and may differ
// only in the order the per-block floats are added.
#include "kernels/quant_kernels.h"

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "kernels/quant_dot.h"

namespace duet {
namespace quant_scalar {
namespace {

// The sum over a row's blocks of block_dot(w[b], x[b]), in block order.
template <class WBlock, class XBlock, class BlockDot>
float sum_blocks(int64_t n_blocks, const void* vw, const void* vx, BlockDot block_dot) {
  const auto* w = static_cast<const WBlock*>(vw);
  const auto* x = static_cast<const XBlock*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < n_blocks; ++b) sum += block_dot(w[b], x[b]);
  return sum;
}

// (sum_i q(w, i) * x.qs[i]) * d_w * d_x + extra(w, x) over the 32-element
// blocks of a row, q(w, i) the weight's element i.
template <class WBlock, class XBlock, class Q, class Extra>
float blocks32_dot(int64_t k, const void* vw, const void* vx, Q q, Extra extra) {
  return sum_blocks<WBlock, XBlock>(k / kQK32, vw, vx, [&](const WBlock& w, const XBlock& x) {
    int isum = 0;
    for (int i = 0; i < kQK32; ++i) isum += q(w, i) * x.qs[i];
    return static_cast<float>(isum) * (f16_to_f32(w.d) * f16_to_f32(x.d)) + extra(w, x);
  });
}

// Element i of a 4-bit block: byte i % 16, low nibble for the first 16.
template <class Block>
int nibble(const Block& w, int i) {
  return i < 16 ? w.qs[i] & 0xF : w.qs[i - 16] >> 4;
}

constexpr auto kNoExtra = [](const auto&, const auto&) { return 0.f; };

// Q4_K and Q5_K: per sub-block j of 32, an unsigned q(w, j, i) times the
// 6-bit scale, less the 6-bit min times the activations' sum.
template <class Block, class Q>
float k4_dot(int64_t k, const void* vw, const void* vx, Q q) {
  return sum_blocks<Block, BlockQ8_K>(k / kQKK, vw, vx, [&](const Block& w, const BlockQ8_K& x) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_scale_min(w.scales, j, &sc, &m);
      int s = 0;
      for (int i = 0; i < 32; ++i) s += q(w, j, i) * x.qs[32 * j + i];
      isum += sc * s;
      msum += m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    }
    const float d = x.d * f16_to_f32(w.d);
    const float dmin = x.d * f16_to_f32(w.dmin);
    return d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  });
}

// The low 4 bits of element i of sub-block j.
template <class Block>
int k4_nibble(const Block& w, int j, int i) {
  return (w.qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 0xF;
}

}  // namespace

float vec_dot_q8_0_q8_0(int64_t k, const void* vw, const void* vx) {
  return blocks32_dot<BlockQ8_0, BlockQ8_0>(
      k, vw, vx, [](const BlockQ8_0& w, int i) { return int{w.qs[i]}; }, kNoExtra);
}

float vec_dot_q4_0_q8_0(int64_t k, const void* vw, const void* vx) {
  return blocks32_dot<BlockQ4_0, BlockQ8_0>(
      k, vw, vx, [](const BlockQ4_0& w, int i) { return nibble(w, i) - 8; }, kNoExtra);
}

float vec_dot_q4_1_q8_1(int64_t k, const void* vw, const void* vx) {
  // sum (q*d + m) * xq * dx = d*dx*isum + m * s, where s = dx * sum(xq).
  return blocks32_dot<BlockQ4_1, BlockQ8_1>(
      k, vw, vx, [](const BlockQ4_1& w, int i) { return nibble(w, i); },
      [](const BlockQ4_1& w, const BlockQ8_1& x) { return f16_to_f32(w.m) * f16_to_f32(x.s); });
}

float vec_dot_q4_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return k4_dot<BlockQ4_K>(k, vw, vx, k4_nibble<BlockQ4_K>);
}

float vec_dot_q5_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return k4_dot<BlockQ5_K>(k, vw, vx, [](const BlockQ5_K& w, int j, int i) {
    return k4_nibble(w, j, i) | (((w.qh[i] >> j) & 1) << 4);
  });
}

float vec_dot_q6_K_q8_K(int64_t k, const void* vw, const void* vx) {
  return sum_blocks<BlockQ6_K, BlockQ8_K>(k / kQKK, vw, vx, [](const BlockQ6_K& w, const BlockQ8_K& x) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w.ql + 64 * h;
      const uint8_t* qh = w.qh + 32 * h;
      const int8_t* sc = w.scales + 8 * h;
      const int8_t* xq = x.qs + 128 * h;
      // Quarter r holds elements 32r..32r+31 of this half, sub-blocks 2r, 2r+1.
      for (int r = 0; r < 4; ++r) {
        int s[2] = {0, 0};
        for (int l = 0; l < 32; ++l) {
          const int lo = (ql[l + 32 * (r & 1)] >> (4 * (r >> 1))) & 0xF;
          const int q = (lo | (((qh[l] >> (2 * r)) & 3) << 4)) - 32;
          s[l / 16] += q * xq[32 * r + l];
        }
        isum += sc[2 * r] * s[0] + sc[2 * r + 1] * s[1];
      }
    }
    return (f16_to_f32(w.d) * x.d) * static_cast<float>(isum);
  });
}

}  // namespace quant_scalar

namespace {

// The activation quantizers and dot products of one level.
struct LevelFns {
  void (*q8_0)(const float*, void*, int64_t);
  void (*q8_1)(const float*, void*, int64_t);
  void (*q8_K)(const float*, void*, int64_t);
  float (*q8_0_q8_0)(int64_t, const void*, const void*);
  float (*q4_0_q8_0)(int64_t, const void*, const void*);
  float (*q4_1_q8_1)(int64_t, const void*, const void*);
  float (*q4_K_q8_K)(int64_t, const void*, const void*);
  float (*q5_K_q8_K)(int64_t, const void*, const void*);
  float (*q6_K_q8_K)(int64_t, const void*, const void*);
  DotBlockFn q8_0_block = nullptr, q4_0_block = nullptr;
};

constexpr QuantTypeKernels make(const LevelFns& f) {
  return {{DType::Q8_0, f.q8_0, f.q8_0_q8_0, dequantize_row_q8_0, f.q8_0_block},
          {DType::Q8_0, f.q8_0, f.q4_0_q8_0, dequantize_row_q4_0, f.q4_0_block},
          {DType::Q8_1, f.q8_1, f.q4_1_q8_1, dequantize_row_q4_1},
          {DType::Q8_K, f.q8_K, f.q4_K_q8_K, dequantize_row_q4_K},
          {DType::Q8_K, f.q8_K, f.q5_K_q8_K, dequantize_row_q5_K},
          {DType::Q8_K, f.q8_K, f.q6_K_q8_K, dequantize_row_q6_K}};
}

}  // namespace

constexpr QuantTypeKernels kQuantScalar = make(
    {quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K, quant_scalar::vec_dot_q8_0_q8_0,
     quant_scalar::vec_dot_q4_0_q8_0, quant_scalar::vec_dot_q4_1_q8_1, quant_scalar::vec_dot_q4_K_q8_K,
     quant_scalar::vec_dot_q5_K_q8_K, quant_scalar::vec_dot_q6_K_q8_K});
constexpr QuantTypeKernels kQuantAvx2 = make(
    {quant_avx2::quantize_row_q8_0, quant_avx2::quantize_row_q8_1, quant_avx2::quantize_row_q8_K,
     quant_avx2::vec_dot_q8_0_q8_0, quant_avx2::vec_dot_q4_0_q8_0, quant_avx2::vec_dot_q4_1_q8_1,
     quant_avx2::vec_dot_q4_K_q8_K, quant_avx2::vec_dot_q5_K_q8_K, quant_avx2::vec_dot_q6_K_q8_K});
// The activation quantizers run once per row; AVX2's serve AVX-512 too.
constexpr QuantTypeKernels kQuantAvx512 = make(
    {quant_avx2::quantize_row_q8_0, quant_avx2::quantize_row_q8_1, quant_avx2::quantize_row_q8_K,
     quant_avx512::vec_dot_q8_0_q8_0, quant_avx512::vec_dot_q4_0_q8_0, quant_avx512::vec_dot_q4_1_q8_1,
     quant_avx512::vec_dot_q4_K_q8_K, quant_avx512::vec_dot_q5_K_q8_K, quant_avx512::vec_dot_q6_K_q8_K,
     quant_avx512::dot_block_q8_0, quant_avx512::dot_block_q4_0});

}  // namespace duet
