// The probes of the two SIMD levels, written once over a width trait V
// (kernels/vec.h). Include only from probes_avx2.cc / probes_avx512.cc.
#pragma once

#include "kernels/probes.h"
#include "kernels/vec.h"

namespace duet::probes_simd {
namespace {

// kPrefetch: software prefetch kProbePrefetchBytes ahead, a line at a time.
template <class V, bool kPrefetch>
float sum(const float* x, size_t n) {
  constexpr size_t kAhead = kProbePrefetchBytes / sizeof(float);
  constexpr size_t kStep = 4 * V::kLanes;
  typename V::F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += kStep) {
    if constexpr (kPrefetch)
      for (size_t line = 0; line < kStep; line += 16)
        _mm_prefetch(reinterpret_cast<const char*>(x + i + line + kAhead), _MM_HINT_T0);
    a0 = V::add(a0, V::load(x + i));
    a1 = V::add(a1, V::load(x + i + V::kLanes));
    a2 = V::add(a2, V::load(x + i + 2 * V::kLanes));
    a3 = V::add(a3, V::load(x + i + 3 * V::kLanes));
  }
  return V::reduce_add(V::add(V::add(a0, a1), V::add(a2, a3)));
}

// kStreams equal parts side by side, 64 floats of each in turn; the few
// floats past the last whole part by the plain loop.
template <class V, int kStreams>
float sum_streams(const float* x, size_t n) {
  const size_t part = n / kStreams / 64 * 64;
  typename V::F a[kStreams];
  for (auto& v : a) v = V::zero();
  for (size_t i = 0; i < part; i += 64)
    for (int s = 0; s < kStreams; ++s) {
      const float* p = x + static_cast<size_t>(s) * part + i;
      for (int j = 0; j < 64; j += V::kLanes) a[s] = V::add(a[s], V::load(p + j));
    }
  float total = sum<V, false>(x + kStreams * part, n - kStreams * part);
  for (const auto& v : a) total += V::reduce_add(v);
  return total;
}

template <class V>
double fma_flops(int64_t iters, float* sink) {
  typename V::F a[V::kFmaChains];
  for (int j = 0; j < V::kFmaChains; ++j) a[j] = V::set1(static_cast<float>(j));
  const typename V::F m = V::set1(0.999999f), c = V::set1(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a) v = V::fmadd(v, m, c);
  typename V::F s = a[0];
  for (int j = 1; j < V::kFmaChains; ++j) s = V::add(s, a[j]);
  *sink = V::reduce_add(s);
  return 2.0 * V::kLanes * V::kFmaChains * static_cast<double>(iters);
}

template <class V>
double int8_ops(int64_t iters, int32_t* sink) {
  typename V::I a[V::kDotChains];
  for (auto& v : a) v = V::zero_i();
  const typename V::I x = V::set1_i8(3), y = V::set1_i8(-2);
  for (int64_t i = 0; i < iters; ++i)
    for (auto& v : a) v = V::dot_u8s8(v, x, y);
  typename V::I s = a[0];
  for (int j = 1; j < V::kDotChains; ++j) s = V::add_i32(s, a[j]);
  *sink = V::lane0(s);
  return 2.0 * 4 * V::kLanes * V::kDotChains * static_cast<double>(iters);
}

template <class V>
constexpr ProbeKernels kernels() {
  return {{sum<V, false>, sum<V, true>, sum_streams<V, 2>, sum_streams<V, 4>}, fma_flops<V>, int8_ops<V>};
}

}  // namespace
}  // namespace duet::probes_simd
