#include "quantize/weighted_quant.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace duet {
namespace {

// Scale candidates per block: multipliers of the reference step.
constexpr int kSteps = 24;
constexpr float kStepRange = 0.3f;  // candidates span reference * [1 - r, 1 + r]

float round_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

// Weights of one block; uniform when the block's importance is all zero
// (channels never active in calibration still need a sensible fit).
void block_weights(const float* importance, float* w) {
  float sum = 0.f;
  for (int i = 0; i < kQK32; ++i) sum += importance[i];
  for (int i = 0; i < kQK32; ++i) w[i] = sum > 0.f ? importance[i] : 1.f;
}

// Levels -8..7 for step d, as Q4_0 stores them plus 8.
void levels_q4_0(const float* x, float d, uint8_t* q) {
  const float id = d != 0.f ? 1.f / d : 0.f;
  for (int i = 0; i < kQK32; ++i)
    q[i] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround(x[i] * id)), -8, 7) + 8);
}

float error_q4_0(const float* x, const float* w, float d, const uint8_t* q) {
  float e = 0.f;
  for (int i = 0; i < kQK32; ++i) {
    const float diff = x[i] - d * (q[i] - 8);
    e += w[i] * diff * diff;
  }
  return e;
}

void levels_q4_1(const float* x, float d, float m, uint8_t* q) {
  const float id = d != 0.f ? 1.f / d : 0.f;
  for (int i = 0; i < kQK32; ++i)
    q[i] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround((x[i] - m) * id)), 0, 15));
}

float error_q4_1(const float* x, const float* w, float d, float m, const uint8_t* q) {
  float e = 0.f;
  for (int i = 0; i < kQK32; ++i) {
    const float diff = x[i] - (d * q[i] + m);
    e += w[i] * diff * diff;
  }
  return e;
}

// Byte j: element j in the low nibble, element j+16 in the high nibble.
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kQK32 / 2; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

}  // namespace

void quantize_row_q4_0_weighted(const float* x, void* vy, int64_t k, const float* importance) {
  auto* y = static_cast<BlockQ4_0*>(vy);
  for (int64_t b = 0; b < k / kQK32; ++b, x += kQK32, importance += kQK32) {
    float w[kQK32];
    block_weights(importance, w);
    float max = 0.f;  // the element of largest magnitude, signed
    for (int i = 0; i < kQK32; ++i)
      if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
    const float reference = max / -8.f;
    uint8_t q[kQK32], best_q[kQK32];
    float best_d = round_f16(reference);
    levels_q4_0(x, best_d, best_q);
    float best_err = error_q4_0(x, w, best_d, best_q);
    for (int s = 0; s <= kSteps && reference != 0.f; ++s) {
      // Fix the levels at this step, then refit the step to them by weighted
      // least squares and round it as the file will store it.
      const float step = reference * (1.f - kStepRange + 2.f * kStepRange * s / kSteps);
      levels_q4_0(x, step, q);
      float sum_xl = 0.f, sum_ll = 0.f;
      for (int i = 0; i < kQK32; ++i) {
        const float l = static_cast<float>(q[i] - 8);
        sum_xl += w[i] * x[i] * l;
        sum_ll += w[i] * l * l;
      }
      if (sum_ll <= 0.f) continue;
      const float d = round_f16(sum_xl / sum_ll);
      levels_q4_0(x, d, q);
      const float e = error_q4_0(x, w, d, q);
      if (e < best_err) {
        best_err = e;
        best_d = d;
        std::copy(q, q + kQK32, best_q);
      }
    }
    y[b].d = f32_to_f16(best_d);
    pack_nibbles(best_q, y[b].qs);
  }
}

void quantize_row_q4_1_weighted(const float* x, void* vy, int64_t k, const float* importance) {
  auto* y = static_cast<BlockQ4_1*>(vy);
  for (int64_t b = 0; b < k / kQK32; ++b, x += kQK32, importance += kQK32) {
    float w[kQK32];
    block_weights(importance, w);
    const auto [lo_it, hi_it] = std::minmax_element(x, x + kQK32);
    const float lo = *lo_it, hi = *hi_it;
    const float reference = (hi - lo) / 15.f;
    uint8_t q[kQK32], best_q[kQK32];
    float best_d = round_f16(reference), best_m = round_f16(lo);
    levels_q4_1(x, best_d, best_m, best_q);
    float best_err = error_q4_1(x, w, best_d, best_m, best_q);
    for (int s = 0; s <= kSteps && reference != 0.f; ++s) {
      const float step = reference * (1.f - kStepRange + 2.f * kStepRange * s / kSteps);
      levels_q4_1(x, step, lo, q);
      // Weighted least squares for x ~ d*q + m with the levels fixed.
      float sw = 0.f, sl = 0.f, sll = 0.f, sx = 0.f, sxl = 0.f;
      for (int i = 0; i < kQK32; ++i) {
        sw += w[i];
        sl += w[i] * q[i];
        sll += w[i] * q[i] * q[i];
        sx += w[i] * x[i];
        sxl += w[i] * x[i] * q[i];
      }
      const float det = sw * sll - sl * sl;
      if (!(det > std::numeric_limits<float>::epsilon() * sw * sll)) continue;
      const float d = round_f16((sw * sxl - sl * sx) / det);
      const float m = round_f16((sll * sx - sl * sxl) / det);
      if (!(d > 0.f)) continue;
      levels_q4_1(x, d, m, q);
      const float e = error_q4_1(x, w, d, m, q);
      if (e < best_err) {
        best_err = e;
        best_d = d;
        best_m = m;
        std::copy(q, q + kQK32, best_q);
      }
    }
    y[b].d = f32_to_f16(best_d);
    y[b].m = f32_to_f16(best_m);
    pack_nibbles(best_q, y[b].qs);
  }
}

}  // namespace duet
