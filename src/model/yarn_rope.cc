#include "model/yarn_rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace duet {
namespace {

// The dim (of rope_dim) whose frequency turns `rotations` times over `ctx`
// positions.
double dim_turning(double rotations, int rope_dim, double base, double ctx) {
  return rope_dim * std::log(ctx / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

std::vector<float> yarn_inv_freq(int rope_dim, double base, const ModelConfig::Yarn& yarn) {
  const double low = std::max(0.0, std::floor(dim_turning(yarn.beta_fast, rope_dim, base, yarn.orig_ctx)));
  double high = std::min(rope_dim - 1.0, std::ceil(dim_turning(yarn.beta_slow, rope_dim, base, yarn.orig_ctx)));
  if (high == low) high += 0.001;  // a step, not a division by zero
  std::vector<float> inv(static_cast<size_t>(rope_dim / 2));
  for (int i = 0; i < rope_dim / 2; ++i) {
    const double extrapolated = std::pow(base, -2.0 * i / rope_dim);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);  // 1: fully interpolated
    inv[static_cast<size_t>(i)] = static_cast<float>(extrapolated / yarn.factor * ramp + extrapolated * (1.0 - ramp));
  }
  return inv;
}

}  // namespace duet
