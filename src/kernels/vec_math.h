// Vector math on vec.h's width traits, written once for AVX2 (Vec256) and
// AVX-512 (Vec512): the same steps and constants, so both levels give the
// same bits. Include only from *_avx2.cc / *_avx512.cc files (see vec.h).
#pragma once

#include "kernels/vec.h"

namespace duet::vec_math {
namespace {

// exp(x), relative error < 2e-7: x = n ln2 + r with |r| <= ln2/2 (ln2 in two
// parts), exp(r) by its degree-6 Taylor polynomial, times 2^n. Inputs are
// clamped to [-100, 88.7]: below, 0 or a subnormal; above, the largest
// finite floats.
template <class V>
inline typename V::F exp(typename V::F x) {
  x = V::min(V::max(x, V::set1(-100.0f)), V::set1(88.7f));
  const typename V::F n = V::round(V::mul(x, V::set1(1.44269504f)));
  typename V::F r = V::fnmadd(n, V::set1(0.693145751953125f), x);
  r = V::fnmadd(n, V::set1(1.428606765330187e-06f), r);
  typename V::F p = V::set1(1.0f / 720);
  for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = V::fmadd(p, r, V::set1(c));
  return V::scale_pow2(p, n);
}

// exp(x) in double lanes: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts,
// the first exact times any n in range), exp(r) by its degree-13 Taylor
// polynomial (truncation < 1e-17), times 2^n, which rounds results below
// 2^-1022 into subnormals and zero once, as std::exp does.
template <class V>
inline typename V::D exp_d(typename V::D x) {
  x = V::min_d(V::max_d(x, V::set1_d(-746.0)), V::set1_d(709.0));
  const typename V::D n = V::round_d(V::mul_d(x, V::set1_d(1.4426950408889634)));
  typename V::D r = V::fnmadd_d(n, V::set1_d(6.93147180369123816490e-01), x);
  r = V::fnmadd_d(n, V::set1_d(1.90821492927058770002e-10), r);
  static constexpr double kInvFact[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800,
                                        1.0 / 362880,     1.0 / 40320,     1.0 / 5040,     1.0 / 720,
                                        1.0 / 120,        1.0 / 24,        1.0 / 6,        0.5,
                                        1.0,              1.0};
  typename V::D p = V::set1_d(kInvFact[0]);
  for (int i = 1; i < 14; ++i) p = V::fmadd_d(p, r, V::set1_d(kInvFact[i]));
  return V::scale_pow2_d(p, n);
}

}  // namespace
}  // namespace duet::vec_math
