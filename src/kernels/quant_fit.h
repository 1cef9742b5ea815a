// The scale searches shared by the quantizers of quant.cc and its sibling
// files (quant_q5.cc, quant_k_low.cc, quant_iq4.cc): rounding, the affine
// fit of the K-quants with mins, the symmetric fit of those without, and
// the element weights both minimize against.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>

#include "core/half.h"

namespace duet::quant_fit {

// Round half to even for |x| < 2^22: adding 1.5 * 2^23 puts the integer part
// in the low mantissa bits, rounded by the FPU's default mode.
inline int nearest_int(float x) {
  assert(std::fabs(x) <= 4194303.f);
  const float biased = x + 12582912.f;
  return static_cast<int>(f32_to_bits(biased) & 0x007fffff) - 0x00400000;
}

// The element of largest magnitude (the first one, on ties) and its magnitude.
inline float signed_absmax(const float* x, int n, float* amax_out) {
  float amax = 0.f, max = 0.f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      max = x[i];
    }
  }
  *amax_out = amax;
  return max;
}

// Finds scale > 0 and min >= 0 with x[i] ~ scale * L[i] - min, L[i] in
// [0, nmax], n <= 32, minimizing sum w[i] * (scale*L[i] - min - x[i])^2 over
// nstep + 1 candidate step sizes (quant_fit.cc). Returns the scale; *min_out
// gets min.
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                 float rmin, float rdelta, int nstep);

// Finds scale with x[i] ~ scale * l[i], l[i] in [-nmax, nmax-1], stored as
// L[i] = l[i] + nmax, maximizing the weighted least-squares error reduction.
float fit_symmetric(int n, int nmax, const float* x, const float* w, uint8_t* L);

// Element weights of one 256-element super-block for the fits: importance
// * sqrt(sigma2 + x^2) with importance, else |x| + rms of the sub-block of
// `sub` elements (affine) or x^2 (symmetric).
void k_weights(const float* x, const float* importance, float* w, int sub, bool affine);

}  // namespace duet::quant_fit
