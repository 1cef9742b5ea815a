// IQ4_NL and IQ4_XS: 4-bit indices into kIq4Levels, a fixed non-uniform
// grid, times a scale per 32 elements (IQ4_NL, f16; IQ4_XS, 6 bits of a
// super-block's f16). The quantizer searches the scale as ggml does: 15
// candidates that map the element of largest magnitude near the outermost
// level, each index the level nearest x/scale, keeping the candidate whose
// weighted least-squares scale lowers the error most.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "kernels/quant_fit.h"

namespace duet {
namespace {

using namespace quant_fit;

constexpr int kIq4Sub = 32;

// The index of the level nearest v (a tie goes to the upper one) is how many
// midpoints between consecutive levels lie at or below v. The levels are
// integers, so the doubled midpoints are too, and that count is a function
// of floor(2v) alone: a table over the doubled midpoints' range. The
// quantizers ask this 16 times per element; a binary search's branches on
// these values mispredicted so often that it was most of an IQ4_NL
// quantization, and 15 compares per call most of what was left.
constexpr int kTableLo = kIq4Levels[0] + kIq4Levels[1];     // the lowest doubled midpoint
constexpr int kTableHi = kIq4Levels[14] + kIq4Levels[15];   // the highest
constexpr auto kLevelAt = [] {
  std::array<uint8_t, kTableHi - kTableLo + 1> t{};
  for (int f = kTableLo; f <= kTableHi; ++f)
    for (int i = 0; i < 15; ++i) t[f - kTableLo] += kIq4Levels[i] + kIq4Levels[i + 1] <= f;
  return t;
}();

uint8_t nearest_level(float v) {
  const float f = std::floor(2.f * v);
  if (!(f >= kTableLo)) return f != f ? 15 : 0;  // below every midpoint; a NaN above all, as a binary search has it
  if (f >= kTableHi) return 15;
  return kLevelAt[static_cast<size_t>(static_cast<int>(f) - kTableLo)];
}

// Indices of n values for the scale d (all the middle, level 1, for d = 0).
void pick_levels(const float* x, int n, float d, uint8_t* L) {
  const float id = d != 0.f ? 1.f / d : 0.f;
  for (int i = 0; i < n; ++i) L[i] = nearest_level(id * x[i]);
}

// The weighted least-squares scale of n values over the grid; L gets their
// indices.
float fit_iq4(const float* x, const float* w, int n, uint8_t* L) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < 1e-15f) {
    pick_levels(x, n, 0.f, L);
    return 0.f;
  }
  float best = -1.f, scale = 0.f;
  uint8_t trial[kIq4Sub];
  for (int t = -7; t <= 7; ++t) {
    const float id = (static_cast<float>(kIq4Levels[0]) + t) / max;
    float sum_qx = 0.f, sum_q2 = 0.f;
    for (int i = 0; i < n; ++i) {
      trial[i] = nearest_level(id * x[i]);
      const float q = kIq4Levels[trial[i]];
      sum_qx += w[i] * q * x[i];
      sum_q2 += w[i] * q * q;
    }
    if (sum_q2 > 0.f && sum_qx * sum_qx > best * sum_q2) {
      scale = sum_qx / sum_q2;
      best = scale * sum_qx;
      std::copy(trial, trial + n, L);
    }
  }
  return scale;
}

// Weights of one 32-element block: importance * sqrt(sigma2 + x^2), or x^2.
void block_weights(const float* x, const float* importance, float* w) {
  float sum_x2 = 0.f;
  for (int i = 0; i < kIq4Sub; ++i) sum_x2 += x[i] * x[i];
  const float sigma2 = 2.f * sum_x2 / kIq4Sub;
  for (int i = 0; i < kIq4Sub; ++i) w[i] = importance ? importance[i] * std::sqrt(sigma2 + x[i] * x[i]) : x[i] * x[i];
}

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int i = 0; i < kIq4Sub / 2; ++i) qs[i] = static_cast<uint8_t>(L[i] | (L[i + 16] << 4));
}

int nibble(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

}  // namespace

void quantize_row_iq4_nl(const float* x, void* vy, int64_t k, const float* importance) {
  auto* y = static_cast<BlockIQ4_NL*>(vy);
  for (int64_t b = 0; b < k / kIq4Sub; ++b, x += kIq4Sub) {
    float w[kIq4Sub];
    uint8_t L[kIq4Sub];
    block_weights(x, importance ? importance + b * kIq4Sub : nullptr, w);
    y[b].d = f32_to_f16(fit_iq4(x, w, kIq4Sub, L));
    pick_levels(x, kIq4Sub, f16_to_f32(y[b].d), L);  // against the scale as stored
    pack_nibbles(L, y[b].qs);
  }
}

void quantize_row_iq4_xs(const float* x, void* vy, int64_t k, const float* importance) {
  auto* y = static_cast<BlockIQ4_XS*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b, x += kQKK) {
    float w[kQKK], scales[8];
    uint8_t L[kQKK];
    k_weights(x, importance ? importance + b * kQKK : nullptr, w, kIq4Sub, /*affine=*/false);
    float max_scale = 0.f, max_abs = 0.f;
    for (int j = 0; j < 8; ++j) {
      scales[j] = fit_iq4(x + kIq4Sub * j, w + kIq4Sub * j, kIq4Sub, L + kIq4Sub * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    std::memset(&y[b], 0, sizeof(BlockIQ4_XS));
    // The largest scale maps to -32, the one extreme a signed 6-bit code has.
    const float d = max_abs > 0.f ? max_scale / -32.f : 0.f;
    y[b].d = f32_to_f16(d);
    const float ds = f16_to_f32(y[b].d);
    for (int j = 0; j < 8; ++j) {
      const int l = ds != 0.f ? std::clamp(nearest_int(scales[j] / ds), -32, 31) : 0;
      y[b].scales_l[j / 2] |= static_cast<uint8_t>(((l + 32) & 0xF) << (4 * (j % 2)));
      y[b].scales_h |= static_cast<uint16_t>(((l + 32) >> 4) << (2 * j));
      pick_levels(x + kIq4Sub * j, kIq4Sub, ds * static_cast<float>(l), L + kIq4Sub * j);
      pack_nibbles(L + kIq4Sub * j, y[b].qs + 16 * j);
    }
  }
}

void dequantize_row_iq4_nl(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockIQ4_NL*>(vx);
  for (int64_t b = 0; b < k / kIq4Sub; ++b, y += kIq4Sub) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kIq4Sub; ++i) y[i] = d * static_cast<float>(kIq4Levels[nibble(x[b].qs, i)]);
  }
}

void dequantize_row_iq4_xs(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockIQ4_XS*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int j = 0; j < 8; ++j, y += kIq4Sub) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[b], j));
      for (int i = 0; i < kIq4Sub; ++i) y[i] = dl * static_cast<float>(kIq4Levels[nibble(x[b].qs + 16 * j, i)]);
    }
  }
}

}  // namespace duet
