// Q2_K and Q3_K, the low-bit K-quants: 16 sub-blocks of 16 per super-block.
// Q2_K fits each sub-block affinely (scale and min, 4 bits each, levels 0-3)
// with quant_fit's affine search; Q3_K symmetrically (a signed 6-bit scale,
// levels -4..3) with its symmetric one. Scales are then quantized against the
// block's largest and the levels re-rounded against the stored scales, as
// for Q4_K (quant.cc).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "kernels/quant_fit.h"

namespace duet {
namespace {

using namespace quant_fit;

constexpr int kLowSub = 16;

// Four 2-bit levels per byte: element 128h + 32s + l at bits 2s of byte 32h + l.
void pack2(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* Lh = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((Lh[0] & 3) | (Lh[32] & 3) << 2 | (Lh[64] & 3) << 4 | (Lh[96] & 3) << 6);
    }
}

// The 2-bit level of element i of a block's qs.
int level2(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

// Quantizes v (>= 0) against its largest in `levels` steps: the stored codes
// and the step.
float quantize_scales(const float* v, int n, int levels, uint8_t* codes) {
  const float max = *std::max_element(v, v + n);
  if (max <= 0.f) {
    std::fill(codes, codes + n, 0);
    return 0.f;
  }
  const float iscale = levels / max;
  for (int j = 0; j < n; ++j) codes[j] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * v[j]), 0, levels));
  return max / levels;
}

void quantize_block_q2_K(const float* x, const float* importance, BlockQ2_K& y) {
  float w[kQKK], scales[16], mins[16];
  uint8_t L[kQKK], sc[16], m[16];
  k_weights(x, importance, w, kLowSub, /*affine=*/true);
  for (int j = 0; j < 16; ++j)
    scales[j] = fit_affine(kLowSub, 3, x + kLowSub * j, w + kLowSub * j, L + kLowSub * j, &mins[j], -0.5f, 0.1f, 15);
  y.d = f32_to_f16(quantize_scales(scales, 16, 15, sc));
  y.dmin = f32_to_f16(quantize_scales(mins, 16, 15, m));
  const float d = f16_to_f32(y.d), dmin = f16_to_f32(y.dmin);
  for (int j = 0; j < 16; ++j) {
    y.scales[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
    const float step = d * sc[j], off = dmin * m[j];
    for (int i = 0; i < kLowSub; ++i) {
      const float v = x[kLowSub * j + i];
      L[kLowSub * j + i] = step == 0.f ? 0 : static_cast<uint8_t>(std::clamp(nearest_int((v + off) / step), 0, 3));
    }
  }
  pack2(L, y.qs);
}

// The 16 signed scales (each in [-32, 31]) packed as q3_K_scales reads them.
void pack_q3_scales(const int* sc, uint8_t* packed) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int u = sc[j] + 32;
    packed[j % 8] |= static_cast<uint8_t>((u & 0xF) << (4 * (j / 8)));
    packed[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
  }
}

void quantize_block_q3_K(const float* x, const float* importance, BlockQ3_K& y) {
  float w[kQKK], scales[16];
  uint8_t L[kQKK];
  k_weights(x, importance, w, kLowSub, /*affine=*/false);
  float max_scale = 0.f, max_abs = 0.f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_symmetric(kLowSub, 4, x + kLowSub * j, w + kLowSub * j, L + kLowSub * j);
    if (std::fabs(scales[j]) > max_abs) {
      max_abs = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  std::memset(&y, 0, sizeof y);
  int sc[16] = {};
  if (max_abs >= 1e-15f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = std::clamp(nearest_int(iscale * scales[j]), -32, 31);
    y.d = f32_to_f16(1.f / iscale);
  }
  pack_q3_scales(sc, y.scales);
  const float d = f16_to_f32(y.d);
  for (int j = 0; j < 16; ++j) {
    const float step = d * sc[j];
    for (int i = 0; i < kLowSub; ++i) {
      const float v = x[kLowSub * j + i];
      L[kLowSub * j + i] = step == 0.f ? 4 : static_cast<uint8_t>(4 + std::clamp(nearest_int(v / step), -4, 3));
    }
  }
  // Levels 4-7 set the high bit (no offset), 0-3 leave it clear (offset -4).
  for (int i = 0; i < kQKK; ++i)
    if (L[i] > 3) {
      y.hmask[i % 32] |= static_cast<uint8_t>(1 << (4 * (i / 128) + (i / 32) % 4));
      L[i] = static_cast<uint8_t>(L[i] - 4);
    }
  pack2(L, y.qs);
}

template <class Block, void (*QuantizeBlock)(const float*, const float*, Block&)>
void quantize_k_rows(const float* x, void* vy, int64_t k, const float* importance) {
  auto* y = static_cast<Block*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b)
    QuantizeBlock(x + b * kQKK, importance ? importance + b * kQKK : nullptr, y[b]);
}

}  // namespace

void quantize_row_q2_K(const float* x, void* y, int64_t k, const float* importance) {
  quantize_k_rows<BlockQ2_K, quantize_block_q2_K>(x, y, k, importance);
}

void quantize_row_q3_K(const float* x, void* y, int64_t k, const float* importance) {
  quantize_k_rows<BlockQ3_K, quantize_block_q3_K>(x, y, k, importance);
}

void dequantize_row_q2_K(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ2_K*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
    for (int j = 0; j < 16; ++j, y += kLowSub) {
      // Each product rounded on its own (no fused multiply-add), as ggml does.
      const float dl = d * static_cast<float>(x[b].scales[j] & 0xF);
      const float ml = dmin * static_cast<float>(x[b].scales[j] >> 4);
      for (int i = 0; i < kLowSub; ++i) y[i] = dl * static_cast<float>(level2(x[b].qs, kLowSub * j + i)) - ml;
    }
  }
}

void dequantize_row_q3_K(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ3_K*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const float d = f16_to_f32(x[b].d);
    int8_t sc[16];
    q3_K_scales(x[b].scales, sc);
    for (int j = 0; j < 16; ++j, y += kLowSub) {
      const float dl = d * static_cast<float>(sc[j]);
      for (int i = 0; i < kLowSub; ++i) {
        const int e = kLowSub * j + i;
        const bool high = (x[b].hmask[e % 32] >> (4 * (e / 128) + (e / 32) % 4)) & 1;
        y[i] = dl * static_cast<float>(level2(x[b].qs, e) - (high ? 0 : 4));
      }
    }
  }
}

}  // namespace duet
