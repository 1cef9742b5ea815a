#include "kernels/quant_fit.h"

#include <algorithm>

#include "core/quant_blocks.h"

namespace duet::quant_fit {

// ---- Affine fit for Q4_K/Q5_K sub-blocks -------------------------------------
//
// Finds scale > 0 and min >= 0 with x[i] ~ scale * L[i] - min, L[i] in
// [0, nmax], minimizing sum w[i] * (scale*L[i] - min - x[i])^2. Each grid
// point s fixes the levels L by rounding (x - lo) * (nmax + rmin + s*rdelta) /
// (hi - lo); for fixed L the best (scale, offset) solve the weighted normal
// equations. Returns the scale; *min_out gets min.
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                 float rmin, float rdelta, int nstep) {
  float lo = x[0], hi = x[0];
  float sum_w = 0.f, sum_x = 0.f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.f);  // the offset only ever lowers values
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *min_out = -lo;
    return 0.f;
  }
  auto level = [&](float iscale, float v) {
    return static_cast<uint8_t>(std::clamp(nearest_int(iscale * (v - lo)), 0, nmax));
  };
  float iscale = nmax / (hi - lo);
  float scale = 1.f / iscale, offset = lo;
  float best_err = 0.f;
  for (int i = 0; i < n; ++i) {
    L[i] = level(iscale, x[i]);
    const float diff = scale * L[i] + offset - x[i];
    best_err += w[i] * diff * diff;
  }
  uint8_t trial[kQK32];
  assert(n <= kQK32);
  for (int s = 0; s <= nstep; ++s) {
    iscale = (rmin + rdelta * s + nmax) / (hi - lo);
    float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
    for (int i = 0; i < n; ++i) {
      const uint8_t l = level(iscale, x[i]);
      trial[i] = l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.f) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_offset > 0.f) {  // a positive offset cannot be stored; refit through 0
      this_offset = 0.f;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0.f;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_offset - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best_err) {
      std::copy(trial, trial + n, L);
      best_err = err;
      scale = this_scale;
      offset = this_offset;
    }
  }
  *min_out = -offset;
  return scale;
}

// ---- Symmetric fit for Q6_K sub-blocks --------------------------------------
//
// Finds scale with x[i] ~ scale * l[i], l[i] in [-nmax, nmax-1], stored as
// L[i] = l[i] + nmax. For fixed levels the weighted least-squares scale is
// sum(w x l) / sum(w l^2) and it lowers the error by (sum w x l)^2 / sum(w l^2);
// the grid point that lowers it most wins.
float fit_symmetric(int n, int nmax, const float* x, const float* w, uint8_t* L) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < 1e-15f) {
    std::fill(L, L + n, static_cast<uint8_t>(nmax));
    return 0.f;
  }
  auto sums = [&](float iscale, float* sum_lx, float* sum_l2) {
    *sum_lx = 0.f;
    *sum_l2 = 0.f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      *sum_lx += w[i] * x[i] * l;
      *sum_l2 += w[i] * l * l;
    }
  };
  auto store = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<uint8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float best_iscale = -nmax / max;
  float sum_lx, sum_l2;
  sums(best_iscale, &sum_lx, &sum_l2);
  float scale = sum_l2 > 0.f ? sum_lx / sum_l2 : 0.f;
  float best = scale * sum_lx;
  for (int s = -9; s <= 9; ++s) {
    if (s == 0) continue;
    const float iscale = -(nmax + 0.1f * s) / max;
    sums(iscale, &sum_lx, &sum_l2);
    if (sum_l2 > 0.f && sum_lx * sum_lx > best * sum_l2) {
      best_iscale = iscale;
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  store(best_iscale);
  return scale;
}

// Element weights of one super-block for the fits.
void k_weights(const float* x, const float* importance, float* w, int sub, bool affine) {
  float sum_x2 = 0.f;
  for (int i = 0; i < kQKK; ++i) sum_x2 += x[i] * x[i];
  if (importance) {
    const float sigma2 = 2.f * sum_x2 / kQKK;
    for (int i = 0; i < kQKK; ++i) w[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
    return;
  }
  if (!affine) {
    for (int i = 0; i < kQKK; ++i) w[i] = x[i] * x[i];
    return;
  }
  for (int j = 0; j < kQKK / sub; ++j) {  // per sub-block: |x| + rms
    float s2 = 0.f;
    for (int i = 0; i < sub; ++i) s2 += x[j * sub + i] * x[j * sub + i];
    const float rms = std::sqrt(s2 / sub);
    for (int i = 0; i < sub; ++i) w[j * sub + i] = rms + std::fabs(x[j * sub + i]);
  }
}

}  // namespace duet::quant_fit
