// The elementwise ops against double-precision formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/registry.h"

namespace duet {
namespace {

using testing::random_floats;

TEST(Ops, RmsnormMatchesDouble) {
  for (int64_t n : {1, 7, 64, 2048, 5000}) {
    const auto x = random_floats(static_cast<size_t>(n), 1, -3.0f, 3.0f);
    const auto w = random_floats(static_cast<size_t>(n), 2, 0.5f, 1.5f);
    std::vector<float> y(static_cast<size_t>(n));
    const float eps = 1e-5f;
    rmsnorm(x.data(), w.data(), y.data(), n, eps);
    double ss = 0;
    for (float v : x) ss += double{v} * v;
    const double scale = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      const double want = x[i] * scale * w[i];
      // A few roundings of float: mean, root, two products.
      ASSERT_NEAR(y[i], want, 4 * 0x1p-24 * std::fabs(want) + 1e-30) << "n=" << n << " i=" << i;
    }
  }
}

TEST(Ops, RmsnormOfZerosIsZero) {
  std::vector<float> x(16, 0.0f), w(16, 1.0f), y(16, 1.0f);
  rmsnorm(x.data(), w.data(), y.data(), 16, 1e-6f);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(Ops, RopeRotatesPairsByPositionAngle) {
  const int64_t n_heads = 3, head_dim = 10, rope_dim = 8;  // last 2 dims of each head untouched
  std::vector<float> inv_freq(rope_dim / 2);
  for (int64_t i = 0; i < rope_dim / 2; ++i)
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rope_dim));
  for (int32_t pos : {0, 1, 17, 4095, 100000}) {
    auto x = random_floats(static_cast<size_t>(n_heads * head_dim), 3);
    const auto orig = x;
    rope(x.data(), n_heads, head_dim, rope_dim, pos, inv_freq.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      for (int64_t i = 0; i < rope_dim / 2; ++i) {
        const double a = double{inv_freq[i]} * pos;
        const double x0 = orig[h * head_dim + 2 * i], x1 = orig[h * head_dim + 2 * i + 1];
        EXPECT_NEAR(x[h * head_dim + 2 * i], x0 * std::cos(a) - x1 * std::sin(a), 1e-6) << pos;
        EXPECT_NEAR(x[h * head_dim + 2 * i + 1], x0 * std::sin(a) + x1 * std::cos(a), 1e-6) << pos;
      }
      for (int64_t d = rope_dim; d < head_dim; ++d) EXPECT_EQ(x[h * head_dim + d], orig[h * head_dim + d]);
    }
  }
}

TEST(Ops, SoftmaxMatchesDoubleAndSurvivesLargeValues) {
  for (int64_t n : {1, 5, 100, 4097}) {
    auto x = random_floats(static_cast<size_t>(n), 4, -20.0f, 20.0f);
    x[0] = 1000.0f;  // would overflow exp without the max subtracted
    const auto orig = x;
    softmax(x.data(), n);
    double sum = 0;
    for (float v : orig) sum += std::exp(double{v} - 1000.0);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double{orig[i]} - 1000.0) / sum;
      ASSERT_NEAR(x[i], want, 4 * 0x1p-24 * want + 1e-38) << "n=" << n << " i=" << i;
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(Ops, ExpShiftedMatchesStdExpAtEveryLevel) {
  for (int64_t n : {1, 7, 8, 1001}) {  // whole vectors, a masked tail, both
    auto x = random_floats(static_cast<size_t>(n), 7, -60.0f, 10.0f);
    // Subnormal and zero results, exact zero, the top of the range.
    const float edges[] = {-745.5f, -740.0f, -708.5f, -0.0f, 0.0f, 700.0f, 1e-30f};
    for (size_t i = 0; i < std::size(edges) && i < x.size(); ++i) x[i * x.size() / std::size(edges)] = edges[i];
    const float shift = n == 1 ? 0.0f : 3.5f;
    for (CpuLevel level : testing::runnable_levels()) {
      const auto fn = kernels_at(level).exp_shifted();
      std::vector<double> out(static_cast<size_t>(n) + 1, -1.0);
      const double sum = fn(x.data(), shift, out.data(), n);
      double want_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(x[i] - shift));
        want_sum += want;
        // 2 ulp, and the subnormal range's absolute spacing.
        ASSERT_NEAR(out[i], want, 4.5e-16 * want + 0x1p-1074) << "x=" << x[i] << " at " << cpu_level_name(level);
      }
      EXPECT_EQ(out[static_cast<size_t>(n)], -1.0) << "wrote past n at " << cpu_level_name(level);
      EXPECT_NEAR(sum, want_sum, 1e-14 * want_sum);
    }
  }
}

TEST(Ops, SwigluMatchesDoubleAtEveryLevel) {
  const int64_t n = 1001;  // not a whole number of vectors
  const auto g = random_floats(n, 5, -30.0f, 30.0f);
  const auto u = random_floats(n, 6, -2.0f, 2.0f);
  for (CpuLevel level : testing::runnable_levels()) {
    const auto fn = kernels_at(level).swiglu();
    std::vector<float> out(n);
    fn(g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
      ASSERT_NEAR(out[i], want, 8 * 0x1p-24 * std::fabs(want) + 1e-30)
          << "g=" << g[i] << " at " << cpu_level_name(level);
    }
  }
}

TEST(Ops, GegluMatchesDoubleAtEveryLevel) {
  const int64_t n = 1001;
  const auto g = random_floats(n, 7, -12.0f, 12.0f);
  const auto u = random_floats(n, 8, -2.0f, 2.0f);
  for (CpuLevel level : testing::runnable_levels()) {
    std::vector<float> out(n);
    kernels_at(level).geglu()(g.data(), u.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[i], inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      const double want = 0.5 * x * (1.0 + std::tanh(inner)) * u[i];
      // Far left, gelu's tail is tiny and its relative error large: an absolute floor covers it.
      ASSERT_NEAR(out[i], want, 16 * 0x1p-24 * std::fabs(want) + 1e-6) << "g=" << g[i] << " at " << cpu_level_name(level);
    }
  }
}

TEST(Ops, Avx2AndAvx512VectorExpGiveTheSameBits) {
  // The AVX2 exp forms 2^n as two exact factors where AVX-512 has scalef:
  // one rounding either way, so SwiGLU, GeGLU and the sampler's exp agree
  // bit for bit, subnormal and clamped inputs included.
  const auto levels = testing::runnable_levels();
  if (levels.back() != CpuLevel::kAvx512) GTEST_SKIP() << "no AVX-512 here";
  const int64_t n = 1003;
  auto g = random_floats(n, 9, -120.0f, 120.0f);
  const float edges[] = {-100.0f, -87.5f, -88.7f, 88.7f, 89.0f, 0.0f, -0.0f, 1e-30f};
  std::copy(std::begin(edges), std::end(edges), g.begin());
  const auto u = random_floats(n, 10, -2.0f, 2.0f);
  const KernelSet &a = kernels_at(CpuLevel::kAvx2), &b = kernels_at(CpuLevel::kAvx512);
  for (auto op : {&KernelSet::swiglu, &KernelSet::geglu}) {
    std::vector<float> x(n), y(n);
    (a.*op)()(g.data(), u.data(), x.data(), n);
    (b.*op)()(g.data(), u.data(), y.data(), n);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0);
  }
  auto e = random_floats(n, 11, -760.0f, 720.0f);
  std::vector<double> x(n), y(n);
  a.exp_shifted()(e.data(), 2.0f, x.data(), n);
  b.exp_shifted()(e.data(), 2.0f, y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], y[i]) << "x=" << e[i];
}

}  // namespace
}  // namespace duet
