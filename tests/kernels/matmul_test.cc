#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/registry.h"

namespace duet {
namespace {

using testing::kLengths;
using testing::same_bits;

using testing::random_floats;
using testing::random_weights;

constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr int64_t kTokens[] = {1, 2, 3, 5, 17};
constexpr int64_t kOutputs[] = {1, 3, 37, 100};

std::vector<float> run_matmul(const TensorView& w, const std::vector<float>& x, int64_t m,
                              ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(m * w.ne[1]), NAN);
  std::vector<uint8_t> scratch(activation_scratch_bytes(w, m));
  matmul(w, x.data(), m, y.data(), scratch.data(), pool);
  return y;
}


TEST(Matmul, FloatTypesMatchScalarReference) {
  ThreadPool pool(1);
  for (DType t : kFloatTypes)
    for (int64_t k : kLengths)
      for (int64_t n_out : kOutputs)
        for (int64_t m : kTokens) {
          const auto w = random_weights(t, k, n_out, static_cast<uint32_t>(k + 13 * n_out));
          const auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m + k));
          const auto y = run_matmul(w.view(), x, m, pool);
          const TypeKernels* ref = kernels_at(CpuLevel::kScalar).type(t);
          for (int64_t tok = 0; tok < m; ++tok)
            for (int64_t r = 0; r < n_out; ++r) {
              double abs_sum = 0;
              for (int64_t i = 0; i < k; ++i)
                abs_sum += std::fabs(double{w.values[r * k + i]} * x[tok * k + i]);
              const float want = ref->vec_dot(k, w.row(r), x.data() + tok * k);
              // Two float sums of k products: see float_kernels_test.cc.
              ASSERT_NEAR(y[tok * n_out + r], want, 2.0 * (k + 1) * 0x1p-24 * abs_sum)
                  << dtype_name(t) << " k=" << k << " n_out=" << n_out << " m=" << m;
            }
        }
}

TEST(Matmul, ThreadCountDoesNotChangeResult) {
  ThreadPool one(1), two(2), three(3);
  for (DType t : kFloatTypes)
    for (int64_t k : {7, 257, 2049})
      for (int64_t n_out : {1, 37, 100, 1000})
        for (int64_t m : {1, 5, 17}) {
          const auto w = random_weights(t, k, n_out, 3);
          const auto x = random_floats(static_cast<size_t>(k * m), 4);
          const auto y1 = run_matmul(w.view(), x, m, one);
          EXPECT_TRUE(same_bits(y1, run_matmul(w.view(), x, m, two)));
          EXPECT_TRUE(same_bits(y1, run_matmul(w.view(), x, m, three)));
        }
}

TEST(Matmul, TokenResultDoesNotDependOnBatch) {
  // Batch invariance (DESIGN.md): a token's row of y is the same alone as in a batch.
  ThreadPool pool(2);
  for (DType t : kFloatTypes) {
    const int64_t k = 300, n_out = 70, m = 9;
    const auto w = random_weights(t, k, n_out, 8);
    const auto x = random_floats(static_cast<size_t>(k * m), 9);
    const auto y = run_matmul(w.view(), x, m, pool);
    for (int64_t tok = 0; tok < m; ++tok) {
      const std::vector<float> xt(x.begin() + tok * k, x.begin() + (tok + 1) * k);
      const auto yt = run_matmul(w.view(), xt, 1, pool);
      EXPECT_TRUE(same_bits(yt, std::vector<float>(y.begin() + tok * n_out, y.begin() + (tok + 1) * n_out)))
          << dtype_name(t) << " token " << tok;
    }
  }
}

TEST(Matmul, LargeTiledShapeMatchesPerRowDots) {
  // Enough rows that each thread walks several cache tiles.
  ThreadPool pool(2);
  const int64_t k = 4096, n_out = 300, m = 6;
  for (DType t : kFloatTypes) {
    const auto w = random_weights(t, k, n_out, 21);
    const auto x = random_floats(static_cast<size_t>(k * m), 22);
    const auto y = run_matmul(w.view(), x, m, pool);
    const TypeKernels* tk = type_kernels(t);
    for (int64_t tok = 0; tok < m; ++tok)
      for (int64_t r = 0; r < n_out; ++r)
        ASSERT_EQ(y[tok * n_out + r], tk->vec_dot(k, w.row(r), x.data() + tok * k));
  }
}

TensorView random_quant_weights(DType t, int64_t k, int64_t n_out, std::vector<uint8_t>& bytes, uint32_t seed) {
  const size_t wrow = *row_bytes(t, k);
  bytes.resize(wrow * n_out);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng() & 0x3b);  // keeps f16 scales finite
  return testing::matrix_view(t, k, n_out, bytes);
}

const DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q5_0,
                             DType::Q5_1, DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::IQ4_XS,
                             DType::TQ1_0, DType::TQ2_0, DType::IQ3_S};

TEST(Matmul, QuantizedTypesMatchTheirVecDot) {
  // The generic path (activations converted into vec_dot_type in scratch):
  // row-by-row vec_dot exactly, or a register-blocked kernel (TypeKernels::dot_block)
  // whose sums may be associated differently: equal up to float rounding.
  ThreadPool one(1), three(3);
  for (DType t : kQuantTypes) {
    const TypeKernels* tk = type_kernels(t);
    ASSERT_TRUE(tk) << dtype_name(t);
    for (int64_t k : {32, 512, 544}) {  // 1, 16 and 17 blocks: odd counts leave a lone block
      if (k % traits(t).block_elems) continue;
      const int64_t n_out = 37, m = 5;
      std::vector<uint8_t> bytes;
      const TensorView w = random_quant_weights(t, k, n_out, bytes, static_cast<uint32_t>(5 + k));
      const auto x = random_floats(static_cast<size_t>(k * m), 6);
      const auto y = run_matmul(w, x, m, one);
      EXPECT_TRUE(same_bits(y, run_matmul(w, x, m, three))) << dtype_name(t);
      std::vector<uint8_t> xq(*row_bytes(tk->vec_dot_type, k));
      const bool exact = tk->dot_block == nullptr;
      for (int64_t tok = 0; tok < m; ++tok) {
        tk->from_float(x.data() + tok * k, xq.data(), k);
        double scale = 0;  // the size of the terms, for a rounding bound
        std::vector<float> wf(static_cast<size_t>(k));
        for (int64_t r = 0; r < n_out; ++r) {
          const float ref = tk->vec_dot(k, w.row(r), xq.data());
          const float got = y[tok * n_out + r];
          if (exact) {
            ASSERT_EQ(f32_to_bits(got), f32_to_bits(ref)) << dtype_name(t) << " r=" << r << " t=" << tok;
            continue;
          }
          tk->to_float(w.row(r), wf.data(), k);
          scale = 0;
          for (int64_t i = 0; i < k; ++i) scale += std::abs(wf[i] * x[tok * k + i]);
          ASSERT_NEAR(got, ref, 1e-5 * scale + 1e-6) << dtype_name(t) << " k=" << k << " r=" << r << " t=" << tok;
        }
      }
    }
  }
}

TEST(Matmul, QuantizedTokenResultDoesNotDependOnBatch) {
  // As for float types: decode (one token) and a batch (prefill, a
  // speculative verification) give a token the same bits.
  ThreadPool pool(2);
  for (DType t : kQuantTypes) {
    const int64_t k = 512, n_out = 70, m = 9;
    std::vector<uint8_t> bytes;
    const TensorView w = random_quant_weights(t, k, n_out, bytes, 17);
    const auto x = random_floats(static_cast<size_t>(k * m), 18);
    const auto y = run_matmul(w, x, m, pool);
    for (int64_t tok = 0; tok < m; ++tok) {
      const std::vector<float> xt(x.begin() + tok * k, x.begin() + (tok + 1) * k);
      const auto yt = run_matmul(w, xt, 1, pool);
      EXPECT_TRUE(same_bits(yt, std::vector<float>(y.begin() + tok * n_out, y.begin() + (tok + 1) * n_out)))
          << dtype_name(t) << " token " << tok;
    }
  }
}

}  // namespace
}  // namespace duet
