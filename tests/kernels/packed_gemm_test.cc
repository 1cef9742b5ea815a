#include "kernels/packed_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/type_kernels.h"

namespace duet {
namespace {

using testing::random_floats;

constexpr DType kPackedTypes[] = {DType::Q8_0, DType::Q4_0, DType::F32, DType::F16, DType::BF16};

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Random quantized rows in file layout; scale bits kept finite and small.
struct QuantMatrix {
  std::vector<uint8_t> bytes;
  TensorView view;
};

QuantMatrix random_matrix(DType t, int64_t k, int64_t rows, uint32_t seed) {
  QuantMatrix m;
  m.bytes.resize(*row_bytes(t, k) * static_cast<size_t>(rows));
  std::mt19937 rng(seed);
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
  if (is_float(t)) {  // values in [-1, 1)
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < static_cast<size_t>(k * rows); ++i) {
      const float f = dist(rng);
      if (t == DType::F32) std::memcpy(&m.bytes[i * 4], &f, 4);
      const uint16_t h = t == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
      if (t != DType::F32) std::memcpy(&m.bytes[i * 2], &h, 2);
    }
  }
  // Every block starts with its f16 scale: 0x2000-0x27ff is about 0.008-0.03.
  const size_t block = t == DType::Q8_0 ? 34 : 18;
  for (size_t i = 0; !is_float(t) && i < m.bytes.size(); i += block) {
    m.bytes[i] = static_cast<uint8_t>(rng());
    m.bytes[i + 1] = static_cast<uint8_t>(0x20 | (rng() & 0x07));
  }
  m.view.name = "w";
  m.view.dtype = t;
  m.view.n_dims = 2;
  m.view.ne = {k, rows, 1, 1};
  m.view.data = m.bytes.data();
  m.view.nbytes = m.bytes.size();
  return m;
}

std::vector<uint8_t> packed_copy(const TensorView& w) {
  std::vector<uint8_t> out(w.nbytes);
  pack_weights(w, out.data());
  return out;
}

// The activations a packed kernel takes, and their row stride in bytes.
size_t act_stride(int64_t k, int offset) {
  return offset == kFloatActs ? static_cast<size_t>(k) * sizeof(float) : packed_act_row_bytes(k);
}

std::vector<uint8_t> packed_acts(const std::vector<float>& x, int64_t k, int64_t m, int offset) {
  if (offset == kFloatActs) {
    std::vector<uint8_t> out(x.size() * sizeof(float));
    std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  const size_t row = packed_act_row_bytes(k);
  std::vector<uint8_t> out(row * static_cast<size_t>(m));
  for (int64_t t = 0; t < m; ++t) quantize_packed_act(x.data() + t * k, out.data() + t * row, k, offset);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PackedGemm, ReferenceEqualsFileLayoutDotProducts) {
  // The packed layout and the activations' offset sums hold the same
  // products as the file's blocks: the scalar reference equals the scalar
  // vec_dot up to the order the float terms are added in.
  for (DType t : kPackedTypes) {
    const TypeKernels* tk = type_kernels_at(t, CpuLevel::kScalar);
    for (int64_t k : {32, 96, 544}) {
      if (is_float(t)) k += 3;  // float rows need no whole blocks
      const int64_t rows = 32, m = 3;
      const QuantMatrix w = random_matrix(t, k, rows, static_cast<uint32_t>(k));
      const auto packed = packed_copy(w.view);
      const auto x = random_floats(static_cast<size_t>(k * m), 7);
      const int offset = is_float(t) ? kFloatActs : t == DType::Q8_0 ? 128 : 8;
      const auto xp = packed_acts(x, k, m, offset);
      std::vector<float> y(static_cast<size_t>(rows * m));
      packed_gemm_reference(t, k, packed.data(), rows / kPackRows, xp.data(), act_stride(k, offset), m,
                            y.data(), rows);
      std::vector<uint8_t> xq(*row_bytes(tk->vec_dot_type, k));
      std::vector<float> wf(static_cast<size_t>(k));
      for (int64_t tok = 0; tok < m; ++tok) {
        if (tk->from_float)
          tk->from_float(x.data() + tok * k, xq.data(), k);
        else
          std::memcpy(xq.data(), x.data() + tok * k, xq.size());
        for (int64_t r = 0; r < rows; ++r) {
          tk->to_float(w.view.row(r), wf.data(), k);
          double scale = 0;
          for (int64_t i = 0; i < k; ++i) scale += std::abs(wf[i] * x[tok * k + i]);
          const float ref = tk->vec_dot(k, w.view.row(r), xq.data());
          ASSERT_NEAR(y[tok * rows + r], ref, 1e-5 * scale + 1e-6) << dtype_name(t) << " k=" << k << " r=" << r;
        }
      }
    }
  }
}

TEST(PackedGemm, SimdKernelsEqualTheReferenceBitForBit) {
  bool ran = false;
  for (CpuLevel level : testing::runnable_levels())
    for (DType t : kPackedTypes) {
      const PackedKernels* pk = packed_kernels_at(t, level);
      if (!pk) continue;
      ran = true;
      // Token counts below, at and past the 8-token tile and the 64-token block.
      for (int64_t k : {32, 96, 2048})
        for (int64_t rows : {16, 48})
          for (int64_t m : {1, 3, 8, 9, 12, 13, 17, 70}) {
            if (is_float(t)) k |= 1;  // an odd length
            const QuantMatrix w = random_matrix(t, k, rows, static_cast<uint32_t>(k + rows));
            const auto packed = packed_copy(w.view);
            const auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m), -4.0f, 4.0f);
            const auto xp = packed_acts(x, k, m, pk->offset);
            const size_t xs = act_stride(k, pk->offset);
            std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
            packed_gemm_reference(t, k, packed.data(), rows / kPackRows, xp.data(), xs, m, ref.data(), rows);
            pk->gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, m, got.data(), rows);
            ASSERT_TRUE(same_bits(ref, got)) << dtype_name(t) << " k=" << k << " rows=" << rows << " m=" << m;
          }
    }
  if (!ran) GTEST_SKIP() << "no packed kernels at any level this machine runs";
}

TEST(PackedGemm, OnlyWholeGroupsOfRowsArePacked) {
  const QuantMatrix odd = random_matrix(DType::Q8_0, 64, 40, 1);
  EXPECT_FALSE(packable(odd.view));
  QuantMatrix vec = random_matrix(DType::F32, 64, 32, 2);
  vec.view.n_dims = 1;  // a norm weight, not a matrix
  EXPECT_FALSE(packable(vec.view));
  QuantMatrix k_quant = random_matrix(DType::Q8_0, 256, 32, 2);
  k_quant.view.dtype = DType::Q6_K;  // no packed kernels
  EXPECT_FALSE(packable(k_quant.view));
  const QuantMatrix even = random_matrix(DType::Q4_0, 64, 32, 3);
  EXPECT_EQ(packable(even.view), packed_kernels(DType::Q4_0) != nullptr);
}

TEST(PackedGemm, MatmulIsTheSameForAnyBatchAndThreadCount) {
  // matmul on a packed view: one token alone gets the bits it gets inside a
  // batch, with 1 or 3 threads, and the file-layout matmul's values.
  ThreadPool one(1), three(3);
  for (DType t : kPackedTypes) {
    const QuantMatrix w = random_matrix(t, 512, 96, 11);
    if (!packable(w.view)) GTEST_SKIP() << "no packed kernels on this machine";
    const auto packed = packed_copy(w.view);
    TensorView pv = w.view;
    pv.data = packed.data();
    pv.packed = true;
    const int64_t k = 512, n = 96, m = 21;
    const auto x = random_floats(static_cast<size_t>(k * m), 12);
    auto run = [&](const TensorView& v, const float* xs, int64_t rows, ThreadPool& pool) {
      std::vector<float> y(static_cast<size_t>(rows * n), NAN);
      std::vector<uint8_t> scratch(activation_scratch_bytes(v, rows));
      matmul(v, xs, rows, y.data(), scratch.data(), pool);
      return y;
    };
    const auto batch = run(pv, x.data(), m, one);
    EXPECT_TRUE(same_bits(batch, run(pv, x.data(), m, three))) << dtype_name(t);
    const auto plain = run(w.view, x.data(), m, one);
    for (int64_t tok = 0; tok < m; ++tok) {
      const auto alone = run(pv, x.data() + tok * k, 1, three);
      ASSERT_EQ(std::memcmp(alone.data(), batch.data() + tok * n, n * sizeof(float)), 0) << "token " << tok;
      for (int64_t r = 0; r < n; ++r)
        ASSERT_NEAR(alone[r], plain[tok * n + r], 1e-4 * (1 + std::abs(plain[tok * n + r]))) << r;
    }
  }
}

}  // namespace
}  // namespace duet
