// The AVX-512 BF16 (vdpbf16ps) path of packed BF16 weights against the sums
// it stands for: its products are exact in f32 (bf16 x bf16), so the exact
// dot of the weights and the activations rounded to bf16 (RNE) is known, and
// the kernel's f32 chain of k additions stays within (k + 2) * 2^-24 of the
// sum of |products| of it. Against the f32 reference (f32 activations) the
// activations' rounding adds at most 2^-8 relative per product (8 bits of
// precision, round to nearest).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernel_test_util.h"
#include "kernels/packed_gemm.h"
#include "kernels/registry.h"

namespace duet {
namespace {

using testing::packed_copy;

using testing::random_floats;

struct Bf16Matrix {
  std::vector<uint16_t> bits;  // [rows][k], file layout
  TensorView view;
};

Bf16Matrix random_bf16(int64_t k, int64_t rows, uint32_t seed) {
  Bf16Matrix m;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  m.bits.resize(static_cast<size_t>(k * rows));
  for (auto& b : m.bits) b = f32_to_bf16(dist(rng));
  m.view.name = "w";
  m.view.dtype = DType::BF16;
  m.view.n_dims = 2;
  m.view.ne = {k, rows, 1, 1};
  m.view.data = m.bits.data();
  m.view.nbytes = m.bits.size() * 2;
  return m;
}


bool has_bf16_dot() { return cpu_features().avx512bf16; }

// y from packed_gemm_bf16_dot for m tokens at x_stride xs_floats floats,
// checked element by element against the exact sums.
void expect_within_bf16_bounds(int64_t k, int64_t rows, int64_t m, int64_t xs_floats, uint32_t seed) {
  const Bf16Matrix w = random_bf16(k, rows, seed);
  const auto packed = packed_copy(w.view);
  const auto x = random_floats(static_cast<size_t>(xs_floats * m), seed + 1, -4.0f, 4.0f);
  std::vector<float> got(static_cast<size_t>(rows * m), NAN), ref(got.size());
  const size_t xs = static_cast<size_t>(xs_floats) * sizeof(float);
  packed_gemm_bf16_dot(k, packed.data(), rows / kPackRows, reinterpret_cast<const uint8_t*>(x.data()), xs, m,
                       got.data(), rows);
  packed_gemm_reference(DType::BF16, k, packed.data(), rows / kPackRows, reinterpret_cast<const uint8_t*>(x.data()),
                        xs, m, ref.data(), rows);
  const double u = std::ldexp(1.0, -24);
  for (int64_t t = 0; t < m; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, mag = 0, mag32 = 0;  // exact: bf16 activations; double sums of exact products
      for (int64_t i = 0; i < k; ++i) {
        const double wi = bf16_to_f32(w.bits[static_cast<size_t>(r * k + i)]);
        const float xi = x[static_cast<size_t>(t * xs_floats + i)];
        const double p = wi * bf16_to_f32(f32_to_bf16(xi));
        exact += p;
        mag += std::fabs(p);
        mag32 += std::fabs(wi * xi);
      }
      const double y = got[static_cast<size_t>(t * rows + r)];
      const double tol = static_cast<double>(k + 2) * u * mag + 1e-30;
      ASSERT_LE(std::fabs(y - exact), tol) << "k=" << k << " rows=" << rows << " m=" << m << " t=" << t << " r=" << r;
      const double tol32 = std::ldexp(1.0, -8) * mag32 + 2 * static_cast<double>(k + 2) * u * (mag + mag32) + 1e-30;
      ASSERT_LE(std::fabs(y - ref[static_cast<size_t>(t * rows + r)]), tol32) << "against the f32 reference, k=" << k;
    }
}

// Lengths odd and even, below, at and past one 32-element conversion; one
// and three groups; ragged tiles (1..16 tokens) and several tiles; and
// k = 2049 over several activation blocks (256 KiB of pairs: 48 tokens).
TEST(PackedBf16Dot, WithinRoundingOfTheExactSums) {
  if (!has_bf16_dot()) GTEST_SKIP() << "this CPU lacks AVX512_BF16";
  for (int64_t k : {1, 2, 3, 31, 32, 33, 63, 64, 257, 2049})
    for (int64_t rows : {16, 48})
      for (int64_t m : {1, 2, 5, 12, 13, 16, 17, 33}) expect_within_bf16_bounds(k, rows, m, k, static_cast<uint32_t>(k * 7 + m));
  expect_within_bf16_bounds(2049, 16, 140, 2049, 3);  // three activation blocks
  expect_within_bf16_bounds(100, 32, 19, 107, 4);     // rows of x further apart than k
}

// Inputs whose bf16 rounding is exact (x already bf16, small integers)
// make every partial sum exact: the kernel must then give the exact dot.
TEST(PackedBf16Dot, ExactWhereEveryPartialSumIsExact) {
  if (!has_bf16_dot()) GTEST_SKIP() << "this CPU lacks AVX512_BF16";
  const int64_t k = 77, rows = 32, m = 20;
  Bf16Matrix w = random_bf16(k, rows, 1);
  std::mt19937 rng(2);
  for (auto& b : w.bits) b = f32_to_bf16(static_cast<float>(static_cast<int>(rng() % 17) - 8));
  std::vector<float> x(static_cast<size_t>(k * m));
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 9) - 4);
  const auto packed = packed_copy(w.view);
  std::vector<float> got(static_cast<size_t>(rows * m), NAN), ref(got.size());
  packed_gemm_bf16_dot(k, packed.data(), rows / kPackRows, reinterpret_cast<const uint8_t*>(x.data()), k * 4, m,
                       got.data(), rows);
  packed_gemm_reference(DType::BF16, k, packed.data(), rows / kPackRows, reinterpret_cast<const uint8_t*>(x.data()),
                        k * 4, m, ref.data(), rows);
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0);
}

// The registry takes the dot path exactly where it is enabled, and that
// entry keeps the fma kernels' bits up to 12 tokens (decode, small batches).
TEST(PackedBf16Dot, RegistryEntryKeepsTheFmaBitsUpTo12Tokens) {
  if (cpu_features().best_level() < CpuLevel::kAvx512) GTEST_SKIP() << "this CPU lacks the AVX-512 level";
  const PackedKernels* pk = kernels_at(CpuLevel::kAvx512).packed(DType::BF16);
  EXPECT_EQ(pk == &kPackedAvx512Bf16Dot, bf16_dot_enabled());
  EXPECT_TRUE(!bf16_dot_enabled() || has_bf16_dot());
  const int64_t k = 301, rows = 32;
  const Bf16Matrix w = random_bf16(k, rows, 9);
  const auto packed = packed_copy(w.view);
  for (int64_t m : {1, 2, 7, 12}) {
    const auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m), -4.0f, 4.0f);
    std::vector<float> got(static_cast<size_t>(rows * m), NAN), ref(got.size());
    const auto* xb = reinterpret_cast<const uint8_t*>(x.data());
    kPackedAvx512Bf16Dot.gemm(k, packed.data(), rows / kPackRows, xb, k * 4, m, got.data(), rows);
    packed_gemm_reference(DType::BF16, k, packed.data(), rows / kPackRows, xb, k * 4, m, ref.data(), rows);
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0) << "m=" << m;
  }
}

}  // namespace
}  // namespace duet
