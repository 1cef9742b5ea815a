#include "kernels/quant.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant_fit.h"

namespace duet {
namespace {

using namespace quant_fit;

// Shared part of Q4_K and Q5_K: fits the 8 sub-blocks, stores d, dmin and the
// packed 6-bit scales, and returns the levels L[256] in [0, nmax].
void quantize_k4_scales(const float* x, const float* importance, int nmax, float rmin,
                        int nstep, uint16_t* d_out, uint16_t* dmin_out, uint8_t* packed,
                        uint8_t* L) {
  constexpr int kSub = 32;
  float w[kQKK], scales[8], mins[8];
  k_weights(x, importance, w, kSub, /*affine=*/true);
  float max_scale = 0.f, max_min = 0.f;
  for (int j = 0; j < 8; ++j) {
    scales[j] = fit_affine(kSub, nmax, x + kSub * j, w + kSub * j, L + kSub * j, &mins[j], rmin,
                           0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0.f ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0.f ? 63.f / max_min : 0.f;
  std::memset(packed, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.f);
  *dmin_out = f32_to_f16(max_min / 63.f);
  // Re-round the levels against the scales as stored.
  const float d = f16_to_f32(*d_out), dmin = f16_to_f32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(packed, j, &sc, &m);
    const float step = d * sc;
    const float off = dmin * m;
    for (int i = 0; i < kSub; ++i)
      L[kSub * j + i] = step == 0.f ? 0
          : static_cast<uint8_t>(std::clamp(nearest_int((x[kSub * j + i] + off) / step), 0, nmax));
  }
}

}  // namespace

// ---- 32-element types ----------------------------------------------------------

namespace {

// quantize(x of one block, that block of y) for each n-element block of a row.
template <class Block, int64_t N, class Quantize>
void for_each_block(const float* x, void* vy, int64_t k, Quantize quantize) {
  assert(k % N == 0);
  auto* y = static_cast<Block*>(vy);
  for (int64_t b = 0; b < k / N; ++b) quantize(x + b * N, y[b]);
}

// One 32-element block of Q8_0 / Q8_1: d = amax / 127, qs = round(x / d);
// returns d, and the quants' sum.
float quantize_q8_block(const float* x, int8_t* qs, int* sum) {
  float amax = 0.f;
  for (int i = 0; i < kQK32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  *sum = 0;
  for (int i = 0; i < kQK32; ++i) {
    qs[i] = static_cast<int8_t>(std::round(x[i] * id));
    *sum += qs[i];
  }
  return d;
}

template <class Block>
void dequantize_q8(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const Block*>(vx);
  for (int64_t b = 0; b < k / kQK32; ++b, y += kQK32) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQK32; ++i) y[i] = x[b].qs[i] * d;
  }
}

}  // namespace

void quantize_row_q8_0(const float* x, void* vy, int64_t k) {
  for_each_block<BlockQ8_0, kQK32>(x, vy, k, [](const float* xb, BlockQ8_0& y) {
    int sum;
    y.d = f32_to_f16(quantize_q8_block(xb, y.qs, &sum));
  });
}

void quantize_row_q8_1(const float* x, void* vy, int64_t k) {
  for_each_block<BlockQ8_1, kQK32>(x, vy, k, [](const float* xb, BlockQ8_1& y) {
    int sum;
    const float d = quantize_q8_block(xb, y.qs, &sum);
    y.d = f32_to_f16(d);
    y.s = f32_to_f16(static_cast<float>(sum) * d);
  });
}

void quantize_row_q4_0(const float* x, void* vy, int64_t k) {
  for_each_block<BlockQ4_0, kQK32>(x, vy, k, [](const float* xb, BlockQ4_0& y) {
    float amax;
    const float max = signed_absmax(xb, kQK32, &amax);
    const float d = max / -8.f;  // the extreme element maps to level 0
    const float id = d != 0.f ? 1.f / d : 0.f;
    y.d = f32_to_f16(d);
    for (int i = 0; i < kQK32 / 2; ++i) {
      // Truncation of x/d + 8.5 is rounding half up of x/d + 8.
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(xb[i] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(xb[i + 16] * id + 8.5f)));
      y.qs[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  });
}

void quantize_row_q4_1(const float* x, void* vy, int64_t k) {
  for_each_block<BlockQ4_1, kQK32>(x, vy, k, [](const float* xb, BlockQ4_1& y) {
    float lo = xb[0], hi = xb[0];
    for (int i = 1; i < kQK32; ++i) {
      lo = std::min(lo, xb[i]);
      hi = std::max(hi, xb[i]);
    }
    const float d = (hi - lo) / 15.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y.d = f32_to_f16(d);
    y.m = f32_to_f16(lo);
    for (int i = 0; i < kQK32 / 2; ++i) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((xb[i] - lo) * id + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((xb[i + 16] - lo) * id + 0.5f)));
      y.qs[i] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  });
}

void dequantize_row_q8_0(const void* vx, float* y, int64_t k) { dequantize_q8<BlockQ8_0>(vx, y, k); }

void dequantize_row_q8_1(const void* vx, float* y, int64_t k) { dequantize_q8<BlockQ8_1>(vx, y, k); }

void dequantize_row_q4_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ4_0*>(vx);
  for (int64_t b = 0; b < k / kQK32; ++b, y += kQK32) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQK32 / 2; ++i) {
      y[i] = static_cast<float>((x[b].qs[i] & 0xF) - 8) * d;
      y[i + 16] = static_cast<float>((x[b].qs[i] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ4_1*>(vx);
  for (int64_t b = 0; b < k / kQK32; ++b, y += kQK32) {
    const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
    for (int i = 0; i < kQK32 / 2; ++i) {
      y[i] = static_cast<float>(x[b].qs[i] & 0xF) * d + m;
      y[i + 16] = static_cast<float>(x[b].qs[i] >> 4) * d + m;
    }
  }
}

// ---- K-quants ------------------------------------------------------------------

void quantize_row_q8_K(const float* x, void* vy, int64_t k) {
  for_each_block<BlockQ8_K, kQKK>(x, vy, k, [](const float* xb, BlockQ8_K& y) {
    float amax;
    const float max = signed_absmax(xb, kQKK, &amax);
    if (amax == 0.f) {
      std::memset(&y, 0, sizeof(BlockQ8_K));
      return;
    }
    const float iscale = -127.f / max;
    for (int i = 0; i < kQKK; ++i) y.qs[i] = static_cast<int8_t>(std::min(127, nearest_int(iscale * xb[i])));
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y.qs[16 * j + i];
      y.bsums[j] = static_cast<int16_t>(sum);
    }
    y.d = 1.f / iscale;
  });
}

void dequantize_row_q8_K(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b, y += kQKK)
    for (int i = 0; i < kQKK; ++i) y[i] = x[b].d * x[b].qs[i];
}

namespace {

// Q4_K and Q5_K: the scales and levels L of each super-block fitted with
// levels up to nmax (quantize_k4_scales), then put in place by pack(block, L).
template <class Block, class Pack>
void quantize_k4_rows(const float* x, void* vy, int64_t k, const float* importance, int nmax, float rmin, int nstep,
                      Pack pack) {
  assert(k % kQKK == 0);
  auto* y = static_cast<Block*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b, x += kQKK) {
    uint8_t L[kQKK];
    quantize_k4_scales(x, importance ? importance + b * kQKK : nullptr, nmax, rmin, nstep, &y[b].d, &y[b].dmin,
                       y[b].scales, L);
    pack(y[b], L);
  }
}

}  // namespace

void quantize_row_q4_K(const float* x, void* vy, int64_t k, const float* importance) {
  quantize_k4_rows<BlockQ4_K>(x, vy, k, importance, 15, -1.f, 20, [](BlockQ4_K& y, const uint8_t* L) {
    for (int c = 0; c < kQKK / 64; ++c)
      for (int l = 0; l < 32; ++l) y.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  });
}

void quantize_row_q5_K(const float* x, void* vy, int64_t k, const float* importance) {
  quantize_k4_rows<BlockQ5_K>(x, vy, k, importance, 31, -0.5f, 15, [](BlockQ5_K& y, const uint8_t* L) {
    std::memset(y.qh, 0, sizeof y.qh);
    for (int c = 0; c < kQKK / 64; ++c)
      for (int l = 0; l < 32; ++l) {
        const uint8_t a = L[64 * c + l], e = L[64 * c + 32 + l];
        y.qs[32 * c + l] = static_cast<uint8_t>((a & 0xF) | ((e & 0xF) << 4));
        y.qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * c)) | ((e >> 4) << (2 * c + 1)));
      }
  });
}

void quantize_row_q6_K(const float* x, void* vy, int64_t k, const float* importance) {
  assert(k % kQKK == 0);
  auto* y = static_cast<BlockQ6_K*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b, x += kQKK) {
    float w[kQKK], scales[16];
    uint8_t L[kQKK];
    k_weights(x, importance ? importance + b * kQKK : nullptr, w, 16, /*affine=*/false);
    float max_scale = 0.f, max_abs = 0.f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric(16, 32, x + 16 * j, w + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    std::memset(&y[b], 0, sizeof(BlockQ6_K));
    if (max_abs < 1e-15f) continue;  // all zero
    const float iscale = -128.f / max_scale;
    y[b].d = f32_to_f16(1.f / iscale);
    for (int j = 0; j < 16; ++j)
      y[b].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    const float d = f16_to_f32(y[b].d);
    for (int j = 0; j < 16; ++j) {
      const float step = d * y[b].scales[j];
      for (int i = 0; i < 16; ++i)
        L[16 * j + i] = step == 0.f ? 32
            : static_cast<uint8_t>(32 + std::clamp(nearest_int(x[16 * j + i] / step), -32, 31));
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* Lh = L + 128 * h;
      uint8_t* ql = y[b].ql + 64 * h;
      uint8_t* qh = y[b].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                     ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

namespace {

// Q4_K and Q5_K: q(block, j, l) is element l of sub-block j, unsigned.
template <class Block, class Q>
void dequantize_k4(const void* vx, float* y, int64_t k, Q q) {
  const auto* x = static_cast<const Block*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    for (int j = 0; j < 8; ++j, y += 32) {
      uint8_t sc, m;
      k4_scale_min(x[b].scales, j, &sc, &m);
      const float dj = d * sc, oj = dmin * m;
      for (int l = 0; l < 32; ++l) y[l] = dj * q(x[b], j, l) - oj;
    }
  }
}

template <class Block>
int k4_nibble(const Block& x, int j, int l) {
  return (x.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
}

}  // namespace

void dequantize_row_q4_K(const void* vx, float* y, int64_t k) {
  dequantize_k4<BlockQ4_K>(vx, y, k, k4_nibble<BlockQ4_K>);
}

void dequantize_row_q5_K(const void* vx, float* y, int64_t k) {
  dequantize_k4<BlockQ5_K>(vx, y, k, [](const BlockQ5_K& x, int j, int l) {
    return k4_nibble(x, j, l) + (((x.qh[l] >> j) & 1) << 4);
  });
}

void dequantize_row_q6_K(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ6_K*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[s] * q0;
        y[l + 32] = d * sc[s + 2] * q1;
        y[l + 64] = d * sc[s + 4] * q2;
        y[l + 96] = d * sc[s + 6] * q3;
      }
    }
  }
}

// ---- By type -------------------------------------------------------------------

namespace {

template <void (*Quantize)(const float*, void*, int64_t)>
void without_importance(const float* x, void* y, int64_t k, const float*) {
  Quantize(x, y, k);
}

// The row converters of a type duet quantizes to (or, without quantize, only
// reads).
struct RowCodec {
  DType type;
  void (*quantize)(const float* x, void* y, int64_t k, const float* importance);
  void (*dequantize)(const void* x, float* y, int64_t k);
};

constexpr RowCodec kCodecs[] = {
    {DType::Q8_0, without_importance<quantize_row_q8_0>, dequantize_row_q8_0},
    {DType::Q8_1, without_importance<quantize_row_q8_1>, dequantize_row_q8_1},
    {DType::Q4_0, without_importance<quantize_row_q4_0>, dequantize_row_q4_0},
    {DType::Q4_1, without_importance<quantize_row_q4_1>, dequantize_row_q4_1},
    {DType::Q8_K, without_importance<quantize_row_q8_K>, dequantize_row_q8_K},
    {DType::Q4_K, quantize_row_q4_K, dequantize_row_q4_K},
    {DType::Q5_K, quantize_row_q5_K, dequantize_row_q5_K},
    {DType::Q6_K, quantize_row_q6_K, dequantize_row_q6_K},
    {DType::Q5_0, without_importance<quantize_row_q5_0>, dequantize_row_q5_0},
    {DType::Q5_1, without_importance<quantize_row_q5_1>, dequantize_row_q5_1},
    {DType::Q2_K, quantize_row_q2_K, dequantize_row_q2_K},
    {DType::Q3_K, quantize_row_q3_K, dequantize_row_q3_K},
    {DType::IQ4_NL, quantize_row_iq4_nl, dequantize_row_iq4_nl},
    {DType::IQ4_XS, quantize_row_iq4_xs, dequantize_row_iq4_xs},
    {DType::TQ1_0, without_importance<quantize_row_tq1_0>, dequantize_row_tq1_0},
    {DType::TQ2_0, without_importance<quantize_row_tq2_0>, dequantize_row_tq2_0},
    {DType::IQ3_S, nullptr, dequantize_row_iq3_s},
};

const RowCodec* codec(DType t) {
  for (const RowCodec& c : kCodecs)
    if (c.type == t) return &c;
  return nullptr;
}

}  // namespace

Status quantize_row(DType t, const float* x, void* y, int64_t k, const float* importance) {
  DUET_TRY(row_bytes(t, k));
  // The scale searches and the float-to-int conversions assume finite input.
  for (int64_t i = 0; i < k; ++i)
    if (!std::isfinite(x[i])) return err("cannot quantize non-finite value ", x[i], " at element ", i);
  const RowCodec* c = codec(t);
  if (!c || !c->quantize) return err("cannot quantize to ", dtype_name(t));
  c->quantize(x, y, k, importance);
  return {};
}

bool dequantizable(DType t) { return codec(t) != nullptr; }

Status dequantize_row(DType t, const void* x, float* y, int64_t k) {
  DUET_TRY(row_bytes(t, k));
  const RowCodec* c = codec(t);
  if (!c) return err("cannot dequantize ", dtype_name(t));
  c->dequantize(x, y, k);
  return {};
}

}  // namespace duet
