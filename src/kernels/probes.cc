#include "kernels/probes.h"

namespace duet {
namespace {

template <bool kPrefetch>
float sum_scalar(const float* x, size_t n) {
  constexpr size_t kAhead = kProbePrefetchBytes / sizeof(float);
  float acc[8] = {};
  for (size_t i = 0; i < n; i += 8) {
    if constexpr (kPrefetch)
      if (i % 16 == 0) __builtin_prefetch(x + i + kAhead);
    for (int j = 0; j < 8; ++j) acc[j] += x[i + static_cast<size_t>(j)];
  }
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

template <int kStreams>
float sum_scalar_streams(const float* x, size_t n) {
  const size_t part = n / kStreams / 64 * 64;
  float acc[kStreams] = {};
  for (size_t i = 0; i < part; i += 64)
    for (int s = 0; s < kStreams; ++s)
      for (size_t j = 0; j < 64; ++j) acc[s] += x[static_cast<size_t>(s) * part + i + j];
  float total = sum_scalar<false>(x + kStreams * part, n - kStreams * part);
  for (float a : acc) total += a;
  return total;
}

double fma_scalar(int64_t iters, float* sink) {
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int64_t i = 0; i < iters; ++i)
    for (float& v : a) v = v * 0.999999f + 1e-7f;
  *sink = a[0] + a[7];
  return 2.0 * 8 * static_cast<double>(iters);
}

double int8_scalar(int64_t iters, int32_t* sink) {
  int32_t acc[4] = {};
  uint8_t a = 3;
  int8_t b = -2;
  for (int64_t i = 0; i < iters; ++i)
    for (int32_t& v : acc) v += a * b;
  *sink = acc[0] + acc[3];
  return 2.0 * 4 * static_cast<double>(iters);
}

}  // namespace

constexpr ProbeKernels kProbesScalar = {
    {sum_scalar<false>, sum_scalar<true>, sum_scalar_streams<2>, sum_scalar_streams<4>}, fma_scalar, int8_scalar};

}  // namespace duet
