// Scalar reference dot products of the quantized types, and the kernel
// tables of every CPU level. Each dot product sums exact integer products
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

float vec_dot_q8_0_q8_0(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ8_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQK32; ++b) {
    int isum = 0;
    for (int i = 0; i < kQK32; ++i) isum += w[b].qs[i] * x[b].qs[i];
    sum += static_cast<float>(isum) * (f16_to_f32(w[b].d) * f16_to_f32(x[b].d));
  }
  return sum;
}

float vec_dot_q4_0_q8_0(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_0*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQK32; ++b) {
    int isum = 0;
    for (int i = 0; i < kQK32 / 2; ++i) {
      isum += ((w[b].qs[i] & 0xF) - 8) * x[b].qs[i];
      isum += ((w[b].qs[i] >> 4) - 8) * x[b].qs[i + 16];
    }
    sum += static_cast<float>(isum) * (f16_to_f32(w[b].d) * f16_to_f32(x[b].d));
  }
  return sum;
}

float vec_dot_q4_1_q8_1(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_1*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQK32; ++b) {
    int isum = 0;
    for (int i = 0; i < kQK32 / 2; ++i) {
      isum += (w[b].qs[i] & 0xF) * x[b].qs[i];
      isum += (w[b].qs[i] >> 4) * x[b].qs[i + 16];
    }
    // sum (q*d + m) * xq * dx = d*dx*isum + m * s, where s = dx * sum(xq).
    sum += static_cast<float>(isum) * (f16_to_f32(w[b].d) * f16_to_f32(x[b].d)) +
           f16_to_f32(w[b].m) * f16_to_f32(x[b].s);
  }
  return sum;
}

float vec_dot_q4_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ4_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_scale_min(w[b].scales, j, &sc, &m);
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      const int8_t* xq = x[b].qs + 32 * j;
      int s = 0;
      for (int i = 0; i < 32; ++i) s += ((q[i] >> shift) & 0xF) * xq[i];
      isum += sc * s;
      msum += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    }
    const float d = x[b].d * f16_to_f32(w[b].d);
    const float dmin = x[b].d * f16_to_f32(w[b].dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return sum;
}

float vec_dot_q5_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ5_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      k4_scale_min(w[b].scales, j, &sc, &m);
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      const int8_t* xq = x[b].qs + 32 * j;
      int s = 0;
      for (int i = 0; i < 32; ++i)
        s += (((q[i] >> shift) & 0xF) | (((w[b].qh[i] >> j) & 1) << 4)) * xq[i];
      isum += sc * s;
      msum += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    }
    const float d = x[b].d * f16_to_f32(w[b].d);
    const float dmin = x[b].d * f16_to_f32(w[b].dmin);
    sum += d * static_cast<float>(isum) - dmin * static_cast<float>(msum);
  }
  return sum;
}

float vec_dot_q6_K_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      const int8_t* sc = w[b].scales + 8 * h;
      const int8_t* xq = x[b].qs + 128 * h;
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
    sum += (f16_to_f32(w[b].d) * x[b].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace quant_scalar

namespace {

// The activation quantizer and dot product of one level, per weight type.
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
};

// The kernels of each weight type at one level.
struct LevelTables {
  TypeKernels q8_0, q4_0, q4_1, q4_K, q5_K, q6_K;
};

LevelTables make_tables(const LevelFns& f) {
  LevelTables t;
  t.q8_0 = {DType::Q8_0, f.q8_0, f.q8_0_q8_0, dequantize_row_q8_0};
  t.q4_0 = {DType::Q8_0, f.q8_0, f.q4_0_q8_0, dequantize_row_q4_0};
  t.q4_1 = {DType::Q8_1, f.q8_1, f.q4_1_q8_1, dequantize_row_q4_1};
  t.q4_K = {DType::Q8_K, f.q8_K, f.q4_K_q8_K, dequantize_row_q4_K};
  t.q5_K = {DType::Q8_K, f.q8_K, f.q5_K_q8_K, dequantize_row_q5_K};
  t.q6_K = {DType::Q8_K, f.q8_K, f.q6_K_q8_K, dequantize_row_q6_K};
  return t;
}

const LevelTables& tables(CpuLevel level) {
  static const LevelTables scalar = make_tables(
      {quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_K, quant_scalar::vec_dot_q8_0_q8_0,
       quant_scalar::vec_dot_q4_0_q8_0, quant_scalar::vec_dot_q4_1_q8_1,
       quant_scalar::vec_dot_q4_K_q8_K, quant_scalar::vec_dot_q5_K_q8_K,
       quant_scalar::vec_dot_q6_K_q8_K});
  static const LevelTables avx2 = make_tables(
      {quant_avx2::quantize_row_q8_0, quant_avx2::quantize_row_q8_1, quant_avx2::quantize_row_q8_K,
       quant_avx2::vec_dot_q8_0_q8_0, quant_avx2::vec_dot_q4_0_q8_0, quant_avx2::vec_dot_q4_1_q8_1,
       quant_avx2::vec_dot_q4_K_q8_K, quant_avx2::vec_dot_q5_K_q8_K,
       quant_avx2::vec_dot_q6_K_q8_K});
  // The activation quantizers run once per row; AVX2's serve AVX-512 too.
  static const LevelTables avx512 = make_tables(
      {quant_avx2::quantize_row_q8_0, quant_avx2::quantize_row_q8_1,
       quant_avx2::quantize_row_q8_K, quant_avx512::vec_dot_q8_0_q8_0,
       quant_avx512::vec_dot_q4_0_q8_0, quant_avx512::vec_dot_q4_1_q8_1,
       quant_avx512::vec_dot_q4_K_q8_K, quant_avx512::vec_dot_q5_K_q8_K,
       quant_avx512::vec_dot_q6_K_q8_K});
  switch (level) {
    case CpuLevel::kAvx512: return avx512;
    case CpuLevel::kAvx2: return avx2;
    default: return scalar;
  }
}

}  // namespace

const TypeKernels* quant_type_kernels(DType t, CpuLevel level) {
  const LevelTables& lt = tables(level);
  switch (t) {
    case DType::Q8_0: return &lt.q8_0;
    case DType::Q4_0: return &lt.q4_0;
    case DType::Q4_1: return &lt.q4_1;
    case DType::Q4_K: return &lt.q4_K;
    case DType::Q5_K: return &lt.q5_K;
    case DType::Q6_K: return &lt.q6_K;
    default: return nullptr;
  }
}

}  // namespace duet
