// Every SIMD level's float-type kernels against the scalar reference, and the
// scalar reference against a double-precision loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernel_test_util.h"
#include "kernels/registry.h"

namespace duet {
namespace {

using testing::kLengths;

using testing::random_floats;
using testing::random_weights;
using testing::runnable_levels;

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16};
// Unit roundoff of float.
constexpr double kU = 0x1p-24;

// A float sum of k products, in any order, with or without FMA, is within
// k * u * sum|w_i x_i| of the exact dot (Higham, "Accuracy and Stability of
// Numerical Algorithms", 3.1), first order. Two such sums differ by at most
// twice that; 2(k + 1) leaves room for the second-order term.
double bound_between_float_sums(int64_t k, double abs_sum) { return 2.0 * (k + 1) * kU * abs_sum; }

struct Dot {
  double exact = 0, abs_sum = 0;
};
Dot exact_dot(const float* w, const float* x, int64_t k) {
  Dot d;
  for (int64_t i = 0; i < k; ++i) {
    d.exact += static_cast<double>(w[i]) * x[i];
    d.abs_sum += std::fabs(static_cast<double>(w[i]) * x[i]);
  }
  return d;
}

TEST(FloatKernels, EveryFloatTypeHasKernelsAtEveryLevel) {
  for (CpuLevel level : runnable_levels())
    for (DType t : kTypes) {
      const TypeKernels* tk = kernels_at(level).type(t);
      ASSERT_NE(tk, nullptr) << dtype_name(t) << " at " << cpu_level_name(level);
      EXPECT_EQ(tk->vec_dot_type, DType::F32);
      EXPECT_NE(tk->dot_block, nullptr);
    }
  EXPECT_NE(type_kernels(DType::F16), nullptr);
}

TEST(FloatKernels, ScalarDotMatchesDoublePrecision) {
  for (DType t : kTypes)
    for (int64_t k : kLengths) {
      const auto w = random_weights(t, k, 1, 1000 + static_cast<uint32_t>(k));
      const auto x = random_floats(static_cast<size_t>(k), 2000 + static_cast<uint32_t>(k));
      const float got = kernels_at(CpuLevel::kScalar).type(t)->vec_dot(k, w.row(0), x.data());
      const Dot d = exact_dot(w.values.data(), x.data(), k);
      EXPECT_NEAR(got, d.exact, (k + 1) * kU * d.abs_sum) << dtype_name(t) << " k=" << k;
    }
}

TEST(FloatKernels, VecDotEqualsScalarAtEveryLevel) {
  for (CpuLevel level : runnable_levels())
    for (DType t : kTypes)
      for (int64_t k : kLengths)
        for (uint32_t seed = 0; seed < 5; ++seed) {
          const auto w = random_weights(t, k, 1, seed * 31 + static_cast<uint32_t>(k));
          const auto x = random_floats(static_cast<size_t>(k), seed * 17 + 5);
          const float ref = kernels_at(CpuLevel::kScalar).type(t)->vec_dot(k, w.row(0), x.data());
          const float got = kernels_at(level).type(t)->vec_dot(k, w.row(0), x.data());
          const Dot d = exact_dot(w.values.data(), x.data(), k);
          EXPECT_NEAR(got, ref, bound_between_float_sums(k, d.abs_sum))
              << dtype_name(t) << " at " << cpu_level_name(level) << " k=" << k;
        }
}

TEST(FloatKernels, ToFloatAndFromFloatAreExactAtEveryLevel) {
  for (CpuLevel level : runnable_levels())
    for (DType t : kTypes)
      for (int64_t k : kLengths) {
        const auto w = random_weights(t, k, 1, 77 + static_cast<uint32_t>(k));
        const TypeKernels* tk = kernels_at(level).type(t);
        std::vector<float> out(static_cast<size_t>(k) + 1, -7.0f);
        tk->to_float(w.row(0), out.data(), k);
        for (int64_t i = 0; i < k; ++i)
          ASSERT_EQ(out[i], w.values[i]) << dtype_name(t) << " at " << cpu_level_name(level) << " i=" << i;
        EXPECT_EQ(out[k], -7.0f) << "wrote past the row";

        const auto x = random_floats(static_cast<size_t>(k), 9);
        std::vector<float> conv(static_cast<size_t>(k) + 1, -7.0f);
        tk->from_float(x.data(), conv.data(), k);
        for (int64_t i = 0; i < k; ++i) ASSERT_EQ(conv[i], x[i]);
        EXPECT_EQ(conv[k], -7.0f) << "wrote past the row";
      }
}

TEST(FloatKernels, WideningDecodesSpecialValuesExactly) {
  // Subnormals, infinities and signed zeros of f16 and bf16.
  const uint16_t f16[] = {0x0001, 0x03ff, 0x8001, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x0000, 0x8000,
                          0x3c00, 0x0400, 0xc000, 0x3555, 0x1234, 0x5678, 0x2000, 0x0200};
  const uint16_t bf16[] = {0x0001, 0x007f, 0x8001, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x0000, 0x8000,
                           0x3f80, 0x0080, 0xc000, 0x3eab, 0x1234, 0x5678, 0x4000, 0x0100};
  const int64_t k = 17;
  for (CpuLevel level : runnable_levels()) {
    std::vector<float> out(k);
    kernels_at(level).type(DType::F16)->to_float(f16, out.data(), k);
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(f32_to_bits(out[i]), f32_to_bits(f16_to_f32(f16[i])));
    kernels_at(level).type(DType::BF16)->to_float(bf16, out.data(), k);
    for (int64_t i = 0; i < k; ++i) EXPECT_EQ(f32_to_bits(out[i]), f32_to_bits(bf16_to_f32(bf16[i])));
  }
}

TEST(FloatKernels, DotBlockEqualsVecDotBitForBit) {
  // Batch invariance: a (row, token) dot is the same whatever block it is in.
  for (CpuLevel level : runnable_levels())
    for (DType t : kTypes)
      for (int64_t k : kLengths)
        for (int64_t n_rows : {1, 3, 37})
          for (int64_t m : {1, 2, 3, 5, 17}) {
            const auto w = random_weights(t, k, n_rows, static_cast<uint32_t>(k * 7 + n_rows));
            const auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m));
            const TypeKernels* tk = kernels_at(level).type(t);
            std::vector<float> y(static_cast<size_t>(m * n_rows));
            tk->dot_block(k, w.bytes.data(), w.bytes.size() / n_rows, n_rows,
                          reinterpret_cast<const uint8_t*>(x.data()), k * sizeof(float), m, y.data(), n_rows);
            for (int64_t tok = 0; tok < m; ++tok)
              for (int64_t r = 0; r < n_rows; ++r) {
                const float one = tk->vec_dot(k, w.row(r), x.data() + tok * k);
                ASSERT_EQ(f32_to_bits(y[tok * n_rows + r]), f32_to_bits(one))
                    << dtype_name(t) << " at " << cpu_level_name(level) << " k=" << k
                    << " rows=" << n_rows << " m=" << m << " r=" << r << " t=" << tok;
              }
          }
}

}  // namespace
}  // namespace duet
