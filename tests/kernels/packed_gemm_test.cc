#include "kernels/packed_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/registry.h"
#include "kernels/type_kernels.h"

namespace duet {
namespace {

using testing::packed_copy;
using testing::same_bits;

using testing::random_floats;

constexpr DType kPackedTypes[] = {DType::Q8_0,   DType::Q4_0, DType::Q4_K, DType::Q5_0, DType::Q5_1,
                                  DType::IQ4_NL, DType::IQ4_XS, DType::Q2_K, DType::Q3_K, DType::F32,
                                  DType::F16,    DType::BF16};

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Elements per block of a packed quantized type.
int64_t block_of(DType t) {
  return t == DType::Q4_K || t == DType::IQ4_XS || t == DType::Q2_K || t == DType::Q3_K ? 256 : 32;
}

// Byte offsets of a block's f16 fields (scales and mins).
std::vector<size_t> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_K: return {0, 2};
    case DType::Q5_1: return {0, 2};
    case DType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K: return {offsetof(BlockQ3_K, d)};
    default: return {0};
  }
}

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
  // Every block's f16 scales (and mins) in 0x2000-0x27ff, about 0.008-0.03;
  // the 4- and 6-bit scales take any bits.
  const size_t block = is_float(t) ? 1 : static_cast<size_t>(traits(t).block_bytes);
  for (size_t i = 0; !is_float(t) && i < m.bytes.size(); i += block)
    for (size_t f : f16_fields(t)) {
      m.bytes[i + f] = static_cast<uint8_t>(rng());
      m.bytes[i + f + 1] = static_cast<uint8_t>(0x20 | (rng() & 0x07));
    }
  m.view.name = "w";
  m.view.dtype = t;
  m.view.n_dims = 2;
  m.view.ne = {k, rows, 1, 1};
  m.view.data = m.bytes.data();
  m.view.nbytes = m.bytes.size();
  return m;
}


// The x_stride a packed kernel takes for m tokens: f32 rows' stride, or
// the block stride of int8 activations interleaved by block.
size_t act_stride(int64_t k, int64_t m, int offset) {
  return offset == kFloatActs ? static_cast<size_t>(k) * sizeof(float)
                              : static_cast<size_t>(m) * sizeof(PackedActBlock);
}

std::vector<uint8_t> packed_acts(const std::vector<float>& x, int64_t k, int64_t m, int offset) {
  if (offset == kFloatActs) {
    std::vector<uint8_t> out(x.size() * sizeof(float));
    std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  std::vector<uint8_t> out(packed_act_row_bytes(k) * static_cast<size_t>(m));
  for (int64_t t = 0; t < m; ++t)
    quantize_packed_act(x.data() + t * k, out.data() + t * sizeof(PackedActBlock), k, offset,
                        act_stride(k, m, offset));
  return out;
}


// The activations a packed kernel sees, back as floats.
std::vector<float> acts_as_floats(const std::vector<uint8_t>& xp, int64_t k, int64_t m, int offset) {
  if (offset == kFloatActs) {
    std::vector<float> x(static_cast<size_t>(k * m));
    std::memcpy(x.data(), xp.data(), x.size() * sizeof(float));
    return x;
  }
  std::vector<float> x;
  const auto* blocks = reinterpret_cast<const PackedActBlock*>(xp.data());
  for (int64_t t = 0; t < m; ++t)
    for (int64_t b = 0; b < k / 32; ++b)
      for (int i = 0; i < 32; ++i) x.push_back(blocks[b * m + t].qs[i] * blocks[b * m + t].d);
  return x;
}

int offset_of(DType t) {
  switch (t) {
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return 128;
    case DType::Q5_0: return 16;
    case DType::Q4_0: return 8;
    case DType::Q2_K:
    case DType::Q3_K: return kHalfSums;
    case DType::Q4_K: return kPairSums;
    default: return is_float(t) ? kFloatActs : 1;
  }
}

// y (m tokens x rows) against the dot in double of w's rows, dequantized
// by tk, with x (m x k): within rel x the sum of |products| + abs.
void expect_near_exact_dot(const TypeKernels& tk, const QuantMatrix& w, const std::vector<float>& x,
                           const std::vector<float>& y, int64_t k, int64_t rows, int64_t m, double rel, double abs) {
  std::vector<float> wf(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    tk.to_float(w.view.row(r), wf.data(), k);
    for (int64_t tok = 0; tok < m; ++tok) {
      double exact = 0, scale = 0;
      for (int64_t i = 0; i < k; ++i) {
        exact += double{wf[i]} * x[tok * k + i];
        scale += std::abs(double{wf[i]} * x[tok * k + i]);
      }
      ASSERT_NEAR(y[tok * rows + r], exact, rel * scale + abs)
          << dtype_name(w.view.dtype) << " k=" << k << " r=" << r << " tok=" << tok;
    }
  }
}

TEST(PackedGemm, ReferenceEqualsTheFileWeightsTimesTheActivations) {
  // The packed layout, the offset sums and (Q4_K) the unpacked scales and
  // mins hold the file's numbers: the scalar reference equals, up to float
  // rounding, the dot in double of the scalar dequantization of the file's
  // rows with the activations the kernel was given.
  for (DType t : kPackedTypes) {
    const TypeKernels* tk = kernels_at(CpuLevel::kScalar).type(t);
    for (int64_t k : {32, 96, 544}) {
      if (is_float(t)) k += 3;  // float rows need no whole blocks
      if (block_of(t) == 256) k = k / 32 * 256;
      const int64_t rows = 32, m = 3;
      const QuantMatrix w = random_matrix(t, k, rows, static_cast<uint32_t>(k));
      const auto packed = packed_copy(w.view);
      const auto xp = packed_acts(random_floats(static_cast<size_t>(k * m), 7), k, m, offset_of(t));
      const auto x = acts_as_floats(xp, k, m, offset_of(t));
      std::vector<float> y(static_cast<size_t>(rows * m));
      packed_gemm_reference(t, k, packed.data(), rows / kPackRows, xp.data(), act_stride(k, m, offset_of(t)), m,
                            y.data(), rows);
      expect_near_exact_dot(*tk, w, x, y, k, rows, m, 1e-5, 1e-6);
    }
  }
}

TEST(PackedGemm, SimdKernelsEqualTheReferenceBitForBit) {
  bool ran = false;
  for (CpuLevel level : testing::runnable_levels())
    for (DType t : kPackedTypes) {
      const PackedKernels* pk = kernels_at(level).packed(t);
      if (!pk) continue;
      // The vdpbf16ps path has bf16 activations, not these bits
      // (packed_bf16_dot_test.cc); the fma kernels stay checked here.
      if (pk == &kPackedAvx512Bf16Dot) pk = &kPackedAvx512.bf16;
      ran = true;
      // Token counts below, at and past the 8-token tile and the 64-token block.
      for (int64_t k : {32, 96, 2048})
        for (int64_t rows : {16, 48})
          for (int64_t m : {1, 3, 6, 7, 8, 9, 12, 13, 17, 70}) {
            if (is_float(t)) k |= 1;  // an odd length
            if (block_of(t) == 256) k = (k + 255) / 256 * 256;
            const QuantMatrix w = random_matrix(t, k, rows, static_cast<uint32_t>(k + rows));
            const auto packed = packed_copy(w.view);
            const auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m), -4.0f, 4.0f);
            const auto xp = packed_acts(x, k, m, pk->offset);
            const size_t xs = act_stride(k, m, pk->offset);
            std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
            packed_gemm_reference(t, k, packed.data(), rows / kPackRows, xp.data(), xs, m, ref.data(), rows);
            pk->gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, m, got.data(), rows);
            ASSERT_TRUE(same_bits(ref, got)) << dtype_name(t) << " k=" << k << " rows=" << rows << " m=" << m;
          }
    }
  if (!ran) GTEST_SKIP() << "no packed kernels at any level this machine runs";
}

// One token (decode) runs kernels of its own for most types (scale rows or
// first lines read ahead, integer sums split into chains): lengths of one
// block, a partial activation group, a group and one more block, and
// TinyLlama's 5632; one, two and five 16-row groups.
TEST(PackedGemm, OneTokenKernelsEqualTheReferenceBitForBit) {
  bool ran = false;
  for (CpuLevel level : testing::runnable_levels())
    for (DType t : kPackedTypes) {
      const PackedKernels* pk = kernels_at(level).packed(t);
      if (!pk || is_float(t)) continue;
      ran = true;
      const std::vector<int64_t> ks = block_of(t) == 256 ? std::vector<int64_t>{256, 768, 5632}
                                                         : std::vector<int64_t>{32, 224, 256, 288, 5632};
      for (int64_t k : ks)
        for (int64_t rows : {16, 32, 80}) {
          const QuantMatrix w = random_matrix(t, k, rows, static_cast<uint32_t>(2 * k + rows));
          const auto packed = packed_copy(w.view);
          const auto x = random_floats(static_cast<size_t>(k), static_cast<uint32_t>(k + 1), -4.0f, 4.0f);
          const auto xp = packed_acts(x, k, 1, pk->offset);
          const size_t xs = act_stride(k, 1, pk->offset);
          std::vector<float> ref(static_cast<size_t>(rows)), got(ref.size(), NAN);
          packed_gemm_reference(t, k, packed.data(), rows / kPackRows, xp.data(), xs, 1, ref.data(), rows);
          pk->gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, 1, got.data(), rows);
          ASSERT_TRUE(same_bits(ref, got)) << dtype_name(t) << " k=" << k << " rows=" << rows << " at "
                                           << cpu_level_name(level);
        }
    }
  if (!ran) GTEST_SKIP() << "no packed kernels at any level this machine runs";
}

// One AVX2 kernel against packed_gemm_reference on a random [rows][k]
// matrix of t and m random tokens: bit for bit.
void expect_reference_bits(DType t, const PackedKernels& pk, int64_t k, int64_t rows, int64_t m, uint32_t w_seed,
                           uint32_t x_seed) {
  const QuantMatrix w = random_matrix(t, k, rows, w_seed);
  const auto packed = packed_copy(w.view);
  const auto x = random_floats(static_cast<size_t>(k * m), x_seed, -4.0f, 4.0f);
  const auto xp = packed_acts(x, k, m, pk.offset);
  const size_t xs = act_stride(k, m, pk.offset);
  std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
  packed_gemm_reference(t, k, packed.data(), rows / kPackRows, xp.data(), xs, m, ref.data(), rows);
  pk.gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, m, got.data(), rows);
  EXPECT_TRUE(same_bits(ref, got)) << dtype_name(t) << " k=" << k << " rows=" << rows << " m=" << m;
}

// Each of m tokens alone through one group of rows (decode's one-token
// kernels) equals its rows of ref, the m-token result.
void expect_each_token_alone(const PackedKernels& pk, int64_t k, const std::vector<uint8_t>& packed,
                             const std::vector<uint8_t>& xp, size_t xs, int64_t m, const std::vector<float>& ref,
                             int64_t rows, std::string_view what) {
  for (int64_t tok = 0; tok < m; ++tok) {
    std::vector<float> one(static_cast<size_t>(rows), NAN);
    pk.gemm(k, packed.data(), 1, xp.data() + tok * sizeof(PackedActBlock), xs, 1, one.data(), rows);
    const std::vector<float> want(ref.begin() + tok * rows, ref.begin() + (tok + 1) * rows);
    EXPECT_TRUE(same_bits(want, one)) << what << " token " << tok;
  }
}

// The AVX2 level's own kernels (the test above reaches them only through
// runnable_levels() on a machine whose best level is AVX2 or above): batch
// sizes of decode, every ragged width of the 8-token sub-tiles after a full
// one (9..15: 1..7 tokens left), one and four 16-row groups' worth of
// tokens, and a prefill long enough to use several token blocks.
TEST(PackedGemm, Avx2KernelsEqualTheReferenceBitForBit) {
  if (cpu_features().best_level() < CpuLevel::kAvx2) GTEST_SKIP() << "this CPU lacks AVX2";
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS,
                  DType::Q2_K, DType::Q3_K}) {
    const PackedKernels* pk = kernels_at(CpuLevel::kAvx2).packed(t);
    ASSERT_NE(pk, nullptr) << dtype_name(t);
    for (int64_t k : {256, 1280, 2816})  // 8 blocks, 5 groups, 11 groups (Q4_K: super-blocks)
      for (int64_t rows : {16, 80})
        for (int64_t m : {1, 3, 9, 10, 11, 12, 13, 14, 15, 16, 64, 509}) {
          if ((m == 509 || (m > 8 && m < 16)) && k > 1280) continue;  // once per type and width is enough here
          expect_reference_bits(t, *pk, k, rows, m, static_cast<uint32_t>(3 * k + rows), static_cast<uint32_t>(m + 7));
        }
  }
}

// The AVX2 float kernels: decode's one-pass kernel (1-2 tokens), then
// 16-row x 6-token tiles whose even and odd chains run one after the other,
// kFloatChunk (256) elements of k at a time: lengths odd and even, below,
// at and across chunk boundaries; every ragged tile width; several token
// blocks (k = 2049: 30 tokens a block; k = 5633: 6).
TEST(PackedGemm, Avx2FloatKernelsEqualTheReferenceBitForBit) {
  if (cpu_features().best_level() < CpuLevel::kAvx2) GTEST_SKIP() << "this CPU lacks AVX2";
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const PackedKernels* pk = kernels_at(CpuLevel::kAvx2).packed(t);
    ASSERT_NE(pk, nullptr) << dtype_name(t);
    for (int64_t k : {1, 2, 5, 255, 256, 257, 512, 701, 2049, 5633})
      for (int64_t rows : {16, 48})
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 70}) {
          if (k == 5633 && (rows > 16 || m < 11)) continue;  // the wide rows once per type
          expect_reference_bits(t, *pk, k, rows, m, static_cast<uint32_t>(5 * k + rows), static_cast<uint32_t>(m + 3));
        }
  }
}

// vpmaddubsw saturates pairs at 32767: the largest weights against +-127
// activations of the same or the opposite sign must still sum exactly.
TEST(PackedGemm, Avx2KernelsDoNotSaturateAtExtremeValues) {
  if (cpu_features().best_level() < CpuLevel::kAvx2) GTEST_SKIP() << "this CPU lacks AVX2";
  const int64_t k = 512, rows = 16, m = 2;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_0, DType::IQ4_NL}) {
    const PackedKernels* pk = kernels_at(CpuLevel::kAvx2).packed(t);
    ASSERT_NE(pk, nullptr) << dtype_name(t);
    QuantMatrix w = random_matrix(t, k, rows, 5);
    // Quants at their extremes (Q8_0: -128 or 127; nibbles: 15), scales kept.
    const size_t block = static_cast<size_t>(traits(t).block_bytes);
    const size_t head = t == DType::Q4_K ? 16 : 2;  // d, dmin, 12 bytes of scales
    for (size_t b = 0; b < w.bytes.size(); b += block)
      for (size_t i = b + head; i < b + block; ++i)
        w.bytes[i] = t == DType::Q8_0 ? ((i / 3) % 2 ? 0x80 : 0x7F) : 0xFF;
    const auto packed = packed_copy(w.view);
    // Token 0 all +127 after quantization, token 1 alternating -127 / +127.
    std::vector<float> x(static_cast<size_t>(k * m));
    for (int64_t i = 0; i < k; ++i) {
      x[static_cast<size_t>(i)] = 1.0f;
      x[static_cast<size_t>(k + i)] = i % 2 ? 1.0f : -1.0f;
    }
    const auto xp = packed_acts(x, k, m, pk->offset);
    const size_t xs = act_stride(k, m, pk->offset);
    std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
    packed_gemm_reference(t, k, packed.data(), 1, xp.data(), xs, m, ref.data(), rows);
    pk->gemm(k, packed.data(), 1, xp.data(), xs, m, got.data(), rows);
    EXPECT_TRUE(same_bits(ref, got)) << dtype_name(t);
    expect_each_token_alone(*pk, k, packed, xp, xs, m, ref, rows, dtype_name(t));
  }
}

// The int16 steps of the low-bit kernels (Q2_K / Q3_K sub-block sums, the
// activations' half sums) at their limits: every quant and scale bit clear or
// set, against activations all +127, alternating in sign, or all -127 (Q3_K's
// one-token kernel packs each sub-block's sum into an int16: +-7 * 127 * 16).
TEST(PackedGemm, LowBitKernelsStayExactAtExtremeValues) {
  const int64_t k = 512, rows = 16, m = 3;
  std::vector<float> x(static_cast<size_t>(k * m));
  for (int64_t i = 0; i < k; ++i) {
    x[static_cast<size_t>(i)] = 1.0f;
    x[static_cast<size_t>(k + i)] = i % 2 ? 1.0f : -1.0f;
    x[static_cast<size_t>(2 * k + i)] = -1.0f;
  }
  bool ran = false;
  for (CpuLevel level : testing::runnable_levels())
    for (DType t : {DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::Q2_K, DType::Q3_K})
      for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}}) {
        const PackedKernels* pk = kernels_at(level).packed(t);
        if (!pk) continue;
        ran = true;
        QuantMatrix w = random_matrix(t, k, rows, 9);
        const size_t block = static_cast<size_t>(traits(t).block_bytes);
        const auto fields = f16_fields(t);
        for (size_t i = 0; i < w.bytes.size(); ++i)
          if (std::none_of(fields.begin(), fields.end(), [&](size_t f) { return i % block - f < 2; })) w.bytes[i] = fill;
        const auto packed = packed_copy(w.view);
        const auto xp = packed_acts(x, k, m, pk->offset);
        const size_t xs = act_stride(k, m, pk->offset);
        std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
        packed_gemm_reference(t, k, packed.data(), 1, xp.data(), xs, m, ref.data(), rows);
        pk->gemm(k, packed.data(), 1, xp.data(), xs, m, got.data(), rows);
        EXPECT_TRUE(same_bits(ref, got)) << dtype_name(t) << " fill " << int{fill} << " at " << cpu_level_name(level);
        expect_each_token_alone(*pk, k, packed, xp, xs, m, ref, rows, dtype_name(t));
      }
  if (!ran) GTEST_SKIP() << "no low-bit packed kernels on this machine";
}

// IQ4_XS sums a super-block in one int32, sum_j ls_j * isum_j: at its bound
// (every level -127 or 113, every 6-bit scale -32 or 31, activations all
// +127 or alternating in sign, so |total| reaches 8 * 32 * 32 * 127 * 127 =
// 132128768) the reference still equals the dequantized dot, and every
// level's kernels the reference, bit for bit, also one token at a time.
TEST(PackedGemm, Iq4XsSumsStayExactAtTheirBound) {
  const int64_t k = 512, rows = 16, m = 2;
  const TypeKernels* tk = kernels_at(CpuLevel::kScalar).type(DType::IQ4_XS);
  std::vector<float> x(static_cast<size_t>(k * m));
  for (int64_t i = 0; i < k; ++i) {
    x[static_cast<size_t>(i)] = 1.0f;
    x[static_cast<size_t>(k + i)] = i % 2 ? 1.0f : -1.0f;
  }
  // Scales and quants of each block: all bits clear (ls -32, level -127),
  // all set (31, 113), or -32 with 113 and 31 with -127 by row.
  for (int fill = 0; fill < 3; ++fill) {
    QuantMatrix w = random_matrix(DType::IQ4_XS, k, rows, 13);
    auto* blocks = reinterpret_cast<BlockIQ4_XS*>(w.bytes.data());
    for (int64_t b = 0; b < k / 256 * rows; ++b) {
      const bool high_scales = fill == 1 || (fill == 2 && b % 2);
      const bool high_levels = fill == 1 || (fill == 2 && b % 2 == 0);
      blocks[b].scales_h = high_scales ? 0xFFFF : 0;
      std::memset(blocks[b].scales_l, high_scales ? 0xFF : 0, sizeof blocks[b].scales_l);
      std::memset(blocks[b].qs, high_levels ? 0xFF : 0, sizeof blocks[b].qs);
    }
    const auto packed = packed_copy(w.view);
    const auto xp = packed_acts(x, k, m, 128);
    const size_t xs = act_stride(k, m, 128);
    std::vector<float> ref(static_cast<size_t>(rows * m));
    packed_gemm_reference(DType::IQ4_XS, k, packed.data(), 1, xp.data(), xs, m, ref.data(), rows);
    const auto xf = acts_as_floats(xp, k, m, 128);
    SCOPED_TRACE("fill " + std::to_string(fill));
    expect_near_exact_dot(*tk, w, xf, ref, k, rows, m, 1e-6, 0.0);
    for (CpuLevel level : testing::runnable_levels()) {
      const PackedKernels* pk = kernels_at(level).packed(DType::IQ4_XS);
      if (!pk) continue;
      std::vector<float> got(ref.size(), NAN);
      pk->gemm(k, packed.data(), 1, xp.data(), xs, m, got.data(), rows);
      EXPECT_TRUE(same_bits(ref, got)) << "fill " << fill << " at " << cpu_level_name(level);
      expect_each_token_alone(*pk, k, packed, xp, xs, m, ref, rows, cpu_level_name(level));
    }
  }
}

// Q3_K's level v of an element sits in bits that 16-bit shifts bring in
// from the neighbouring byte (packed_lowbit.h): levels 7 beside levels 0,
// by element and row (fills 0, 1) or by 4-element run and row (fill 2, so
// a byte's fields differ), make any such bit change the sums. The
// reference against the dequantized dot, then every level's kernels
// against the reference, bit for bit, also one token at a time.
TEST(PackedGemm, Q3KLevelsDoNotLeakIntoTheirNeighbours) {
  const int64_t k = 512, rows = 32, m = 2;
  const TypeKernels* tk = kernels_at(CpuLevel::kScalar).type(DType::Q3_K);
  std::vector<float> x(static_cast<size_t>(k * m));
  for (int64_t i = 0; i < k; ++i) {
    x[static_cast<size_t>(i)] = 1.0f;
    x[static_cast<size_t>(k + i)] = i % 2 ? 1.0f : -1.0f;
  }
  for (int fill = 0; fill < 3; ++fill) {
    QuantMatrix w = random_matrix(DType::Q3_K, k, rows, 19);
    auto* blocks = reinterpret_cast<BlockQ3_K*>(w.bytes.data());
    for (int64_t b = 0; b < k / 256 * rows; ++b) {
      const int64_t r = b / (k / 256);
      BlockQ3_K& blk = blocks[b];
      std::memset(blk.qs, 0, sizeof blk.qs);
      std::memset(blk.hmask, 0, sizeof blk.hmask);
      for (int e = 0; e < 256; ++e) {
        const int64_t run = fill == 2 ? e / 4 : e + fill;
        if ((run + r) % 2 == 0) continue;  // level 0
        blk.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(3 << (2 * ((e / 32) % 4)));
        blk.hmask[e % 32] |= static_cast<uint8_t>(1 << (4 * (e / 128) + (e / 32) % 4));
      }
    }
    const auto packed = packed_copy(w.view);
    const auto xp = packed_acts(x, k, m, kHalfSums);
    const size_t xs = act_stride(k, m, kHalfSums);
    std::vector<float> ref(static_cast<size_t>(rows * m));
    packed_gemm_reference(DType::Q3_K, k, packed.data(), rows / kPackRows, xp.data(), xs, m, ref.data(), rows);
    SCOPED_TRACE("fill " + std::to_string(fill));
    expect_near_exact_dot(*tk, w, acts_as_floats(xp, k, m, kHalfSums), ref, k, rows, m, 1e-5, 1e-6);
    for (CpuLevel level : testing::runnable_levels()) {
      const PackedKernels* pk = kernels_at(level).packed(DType::Q3_K);
      if (!pk) continue;
      std::vector<float> got(ref.size(), NAN);
      pk->gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, m, got.data(), rows);
      EXPECT_TRUE(same_bits(ref, got)) << cpu_level_name(level);
      for (int64_t tok = 0; tok < m; ++tok) {
        std::vector<float> one(static_cast<size_t>(rows), NAN);
        pk->gemm(k, packed.data(), rows / kPackRows, xp.data() + tok * sizeof(PackedActBlock), xs, 1, one.data(), rows);
        const std::vector<float> want(ref.begin() + tok * rows, ref.begin() + (tok + 1) * rows);
        EXPECT_TRUE(same_bits(want, one)) << cpu_level_name(level) << " token " << tok;
      }
    }
  }
}

// The AVX2 IQ4_XS kernel takes 8 tokens a call, the AVX-512 one 8 a tile:
// every count across two calls and a ragged one, bit for bit.
TEST(PackedGemm, Iq4XsKernelsEqualTheReferenceAtEveryTokenCount) {
  const int64_t k = 512, rows = 32;
  const QuantMatrix w = random_matrix(DType::IQ4_XS, k, rows, 17);
  const auto packed = packed_copy(w.view);
  bool ran = false;
  for (CpuLevel level : testing::runnable_levels()) {
    const PackedKernels* pk = kernels_at(level).packed(DType::IQ4_XS);
    if (!pk) continue;
    ran = true;
    for (int64_t m = 1; m <= 19; ++m) {
      const auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m), -4.0f, 4.0f);
      const auto xp = packed_acts(x, k, m, pk->offset);
      const size_t xs = act_stride(k, m, pk->offset);
      std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
      packed_gemm_reference(DType::IQ4_XS, k, packed.data(), rows / kPackRows, xp.data(), xs, m, ref.data(), rows);
      pk->gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, m, got.data(), rows);
      ASSERT_TRUE(same_bits(ref, got)) << "m=" << m << " at " << cpu_level_name(level);
    }
  }
  if (!ran) GTEST_SKIP() << "no packed IQ4_XS kernels on this machine";
}

// Q4_K's kernels walk a tile's tokens in two ways (pairs of sub-blocks for
// few tokens, one sub-block at a time for more): every token count across
// two tiles and a ragged one, an odd number of super-blocks, and the
// integer sums at their limits (quants 15, 6-bit scales and mins 63,
// against activations all +127 or alternating in sign), bit for bit.
TEST(PackedGemm, Q4KKernelsEqualTheReferenceAtEveryTokenCount) {
  const int64_t rows = 32;
  bool ran = false;
  for (CpuLevel level : testing::runnable_levels()) {
    const PackedKernels* pk = kernels_at(level).packed(DType::Q4_K);
    if (!pk) continue;
    ran = true;
    for (int64_t k : {256, 768})
      for (int fill : {-1, 0x00, 0xFF}) {  // -1: random quants and scales
        QuantMatrix w = random_matrix(DType::Q4_K, k, rows, static_cast<uint32_t>(k + fill));
        if (fill >= 0)
          for (size_t b = 0; b < w.bytes.size(); b += sizeof(BlockQ4_K))
            std::memset(&w.bytes[b + 4], fill, sizeof(BlockQ4_K) - 4);  // all but d and dmin
        const auto packed = packed_copy(w.view);
        for (int64_t m = 1; m <= 27; ++m) {
          auto x = random_floats(static_cast<size_t>(k * m), static_cast<uint32_t>(m), -4.0f, 4.0f);
          for (int64_t t = 0; t < m; t += 3)  // every third token +127 or alternating
            for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(t * k + i)] = t % 2 && i % 2 ? -1.0f : 1.0f;
          const auto xp = packed_acts(x, k, m, pk->offset);
          const size_t xs = act_stride(k, m, pk->offset);
          std::vector<float> ref(static_cast<size_t>(rows * m)), got(ref.size(), NAN);
          packed_gemm_reference(DType::Q4_K, k, packed.data(), rows / kPackRows, xp.data(), xs, m, ref.data(), rows);
          pk->gemm(k, packed.data(), rows / kPackRows, xp.data(), xs, m, got.data(), rows);
          ASSERT_TRUE(same_bits(ref, got)) << "k=" << k << " fill " << fill << " m=" << m << " at "
                                           << cpu_level_name(level);
        }
      }
  }
  if (!ran) GTEST_SKIP() << "no packed Q4_K kernels on this machine";
}

TEST(PackedGemm, HalfSumsHoldEachHalfOfABlock) {
  const int64_t k = 64;
  std::vector<float> x = random_floats(static_cast<size_t>(k), 5, -1.0f, 1.0f);
  x[0] = 1.0f;  // scale 1/127: the first half of block 0 sums high
  std::vector<uint8_t> out(packed_act_row_bytes(k));
  quantize_packed_act(x.data(), out.data(), k, kHalfSums, sizeof(PackedActBlock));
  const auto* blocks = reinterpret_cast<const PackedActBlock*>(out.data());
  for (int64_t b = 0; b < 2; ++b) {
    int32_t lo = 0, hi = 0;
    for (int i = 0; i < 16; ++i) lo += blocks[b].qs[i];
    for (int i = 16; i < 32; ++i) hi += blocks[b].qs[i];
    EXPECT_EQ(static_cast<int16_t>(blocks[b].start & 0xFFFF), lo) << "block " << b;
    EXPECT_EQ(blocks[b].start >> 16, hi) << "block " << b;
  }
}

TEST(PackedGemm, PairSumsHoldBothBlocksOfAPair) {
  const int64_t k = 5 * kQK32;  // two pairs and a last block alone
  const std::vector<float> x = random_floats(static_cast<size_t>(k), 6, -1.0f, 1.0f);
  std::vector<uint8_t> one(packed_act_row_bytes(k)), pairs(one.size());
  quantize_packed_act(x.data(), one.data(), k, 1, sizeof(PackedActBlock));
  quantize_packed_act(x.data(), pairs.data(), k, kPairSums, sizeof(PackedActBlock));
  const auto* a = reinterpret_cast<const PackedActBlock*>(one.data());
  const auto* p = reinterpret_cast<const PackedActBlock*>(pairs.data());
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_EQ(pair_sum(p[b].start, b), a[b].start) << "block " << b;
    EXPECT_EQ(std::memcmp(p[b].qs, a[b].qs, sizeof a[b].qs), 0) << "block " << b;
    const int64_t mate = b ^ 1;
    if (mate < 5) {
      EXPECT_EQ(pair_sum(p[b].start, mate), a[mate].start) << "block " << b;
    }
  }
  EXPECT_EQ(p[4].start >> 16, 0);
}

TEST(PackedGemm, ActivationsShareOneScalePerGroupOfBlocks) {
  // 17 blocks: two whole groups of 8 and a last group of 1, each with its
  // own absmax; every block of a group carries the group's scale.
  const int64_t k = 17 * kQK32;
  std::vector<float> x = random_floats(static_cast<size_t>(k), 11, -1.0f, 1.0f);
  x[5] = 100.0f;
  x[8 * kQK32 + 3] = -50.0f;
  float last_max = 0.0f;
  for (int64_t i = 16 * kQK32; i < k; ++i) last_max = std::max(last_max, std::fabs(x[i]));
  std::vector<uint8_t> out(packed_act_row_bytes(k));
  quantize_packed_act(x.data(), out.data(), k, 128, sizeof(PackedActBlock));
  const auto* blocks = reinterpret_cast<const PackedActBlock*>(out.data());
  for (int64_t b = 0; b < 17; ++b) {
    const float amax = b < 8 ? 100.0f : b < 16 ? 50.0f : last_max;
    ASSERT_EQ(blocks[b].d, f16_to_f32(f32_to_f16(amax / 127.0f))) << "block " << b;
    int32_t sum = 0;
    for (int i = 0; i < kQK32; ++i) {
      ASSERT_EQ(blocks[b].qs[i], static_cast<int8_t>(std::round(x[b * kQK32 + i] * (1.0f / (amax / 127.0f)))))
          << "block " << b << " element " << i;
      sum += blocks[b].qs[i];
    }
    EXPECT_EQ(blocks[b].start, -128 * sum);
  }
}

TEST(PackedGemm, SimdActivationQuantizersEqualTheReference) {
  for (CpuLevel level : testing::runnable_levels())
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_0, DType::Q5_1, DType::Q2_K}) {
      const PackedKernels* pk = kernels_at(level).packed(t);
      if (!pk) continue;
      const int64_t k = 32 * 37;  // 4 whole groups of 8 blocks and one of 5
      auto x = random_floats(static_cast<size_t>(k), 21, -3.0f, 3.0f);
      for (int64_t i = 8 * 32; i < 16 * 32; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero group
      // Scale 1 (absmax 127): exact halves to round away from zero.
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(16 * 32 + i)] = i - 15.5f;
      x[17 * 32] = 127.0f;
      // Every other block slot left alone: a block stride of two blocks,
      // as for two interleaved tokens.
      const size_t stride = 2 * sizeof(PackedActBlock);
      std::vector<uint8_t> want(2 * packed_act_row_bytes(k), 0xAB), got(want);
      quantize_packed_act(x.data(), want.data(), k, pk->offset, stride);
      pk->quantize(x.data(), got.data(), k, pk->offset, stride);
      EXPECT_EQ(got, want) << dtype_name(t) << " at " << cpu_level_name(level);
    }
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
  EXPECT_EQ(packable(even.view), kernels().packed(DType::Q4_0) != nullptr);
}

TEST(PackedGemm, MatmulIsTheSameForAnyBatchAndThreadCount) {
  // matmul on a packed view: one token alone gets the bits it gets inside a
  // batch, with 1 or 3 threads, and those are the scalar reference's.
  ThreadPool one(1), three(3);
  bool ran = false;
  for (DType t : kPackedTypes) {
    const QuantMatrix w = random_matrix(t, 512, 96, 11);
    if (!packable(w.view)) continue;  // none for this type at this level (AVX2 packs no floats)
    ran = true;
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
    // BF16 batches by vdpbf16ps (bf16 activations) are not decode's bits,
    // by design (packed_bf16_dot_test.cc bounds them).
    if (t == DType::BF16 && kernels().packed(t) == &kPackedAvx512Bf16Dot) continue;
    const auto xp = packed_acts(x, k, m, offset_of(t));
    std::vector<float> ref(batch.size());
    packed_gemm_reference(t, k, packed.data(), n / kPackRows, xp.data(), act_stride(k, m, offset_of(t)), m, ref.data(), n);
    EXPECT_TRUE(same_bits(batch, ref)) << dtype_name(t);
    for (int64_t tok = 0; tok < m; ++tok) {
      const auto alone = run(pv, x.data() + tok * k, 1, three);
      ASSERT_EQ(std::memcmp(alone.data(), batch.data() + tok * n, n * sizeof(float)), 0) << "token " << tok;
    }
  }
  if (!ran) GTEST_SKIP() << "no packed kernels on this machine";
}

TEST(PackedGemm, SharedInputMatmulEqualsSeparateCalls) {
  // q, k, v (or gate, up) through matmul_shared: one quantization of x and
  // one parallel region, the same bits as one matmul per matrix. A set that
  // mixes dtypes, or packed and file layout, takes the separate calls.
  ThreadPool three(3);
  const int64_t k = 512;  // whole Q4_K super-blocks
  const int64_t rows[] = {64, 32, 48};
  bool ran = false;
  for (DType t : kPackedTypes) {
    std::vector<QuantMatrix> ws;
    std::vector<std::vector<uint8_t>> packed;
    std::vector<TensorView> views;
    for (int i = 0; i < 3; ++i) ws.push_back(random_matrix(t, k, rows[i], 30 + i));
    if (!packable(ws[0].view)) continue;  // none for this type at this level (AVX2 packs no floats)
    ran = true;
    for (int i = 0; i < 3; ++i) {
      packed.push_back(packed_copy(ws[i].view));
      views.push_back(ws[i].view);
      views.back().data = packed.back().data();
      views.back().packed = true;
    }
    for (bool mixed : {false, true}) {
      if (mixed) views[1] = ws[1].view;  // file layout
      for (int64_t m : {1, 7, 40}) {
        const auto x = random_floats(static_cast<size_t>(k * m), 40 + static_cast<uint32_t>(m));
        size_t scratch_bytes = 0;
        for (const TensorView& v : views) scratch_bytes = std::max(scratch_bytes, activation_scratch_bytes(v, m));
        std::vector<uint8_t> scratch(scratch_bytes);
        std::vector<std::vector<float>> apart, together;
        for (int i = 0; i < 3; ++i) {
          apart.emplace_back(static_cast<size_t>(rows[i] * m), NAN);
          together.emplace_back(static_cast<size_t>(rows[i] * m), NAN);
          matmul(views[static_cast<size_t>(i)], x.data(), m, apart.back().data(), scratch.data(), three);
        }
        const TensorView* ws_ptrs[] = {&views[0], &views[1], &views[2]};
        float* ys[] = {together[0].data(), together[1].data(), together[2].data()};
        matmul_shared(ws_ptrs, x.data(), m, ys, scratch.data(), three);
        for (int i = 0; i < 3; ++i)
          EXPECT_TRUE(same_bits(apart[static_cast<size_t>(i)], together[static_cast<size_t>(i)]))
              << dtype_name(t) << " matrix " << i << " m " << m << (mixed ? " mixed" : "");
      }
    }
  }
  if (!ran) GTEST_SKIP() << "no packed kernels on this machine";
}

// Four random matrices of one type (rows[i] x k, seeds seed + i), and views
// of their packed copies where the type packs at this level.
struct FourMatrices {
  std::vector<QuantMatrix> ws;
  std::vector<std::vector<uint8_t>> packed;
  std::vector<TensorView> views;
  bool packs = false;
  FourMatrices(DType t, int64_t k, const int64_t (&rows)[4], uint32_t seed) {
    for (uint32_t i = 0; i < 4; ++i) ws.push_back(random_matrix(t, k, rows[i], seed + i));
    packs = packable(ws[0].view);
    if (!packs) return;
    for (int i = 0; i < 4; ++i) {
      packed.push_back(packed_copy(ws[i].view));
      views.push_back(ws[i].view);
      views.back().data = packed.back().data();
      views.back().packed = true;
    }
  }
};

TEST(PackedGemm, GroupedMatmulEqualsSeparateCalls) {
  // A mixture of experts' step: each matrix on its own rows (two of them on
  // the same rows, as gate and up are), some over 16 tokens so the grouped
  // region takes tiles, in one call: the same bits as one matmul each. With
  // a file-layout matrix among them, the separate calls. The second set
  // has more rows than one range of the activations' quantization takes
  // (64 at k = 512), so ranges start inside an item.
  ThreadPool three(3);
  const int64_t k = 512;
  const int64_t rows[] = {64, 32, 48, 32};
  const int64_t m_sets[][4] = {{1, 1, 5, 20}, {1, 1, 37, 70}};
  bool ran = false;
  for (const auto& ms : m_sets) {
    for (DType t : kPackedTypes) {
      FourMatrices four(t, k, rows, 50);
      if (!four.packs) continue;  // none for this type at this level (AVX2 packs no floats)
      ran = true;
      std::vector<QuantMatrix>& ws = four.ws;
      std::vector<TensorView>& views = four.views;
      for (bool mixed : {false, true}) {
        if (mixed) views[2] = ws[2].view;
        std::vector<std::vector<float>> xs, apart, together;
        std::vector<MatmulItem> items;
        int64_t total_m = 0;
        for (int i = 0; i < 4; ++i) {
          const auto m = ms[i];
          total_m += m;
          if (i == 1) xs.push_back(xs[0]);  // matrices 0 and 1 read the same rows
          else xs.push_back(random_floats(static_cast<size_t>(k * m), 60 + static_cast<uint32_t>(i)));
          apart.emplace_back(static_cast<size_t>(rows[i] * m), NAN);
          together.emplace_back(static_cast<size_t>(rows[i] * m), NAN);
        }
        std::vector<uint8_t> scratch(grouped_scratch_bytes(views[0], total_m) +
                                     activation_scratch_bytes(ws[2].view, ms[2]));
        for (size_t i = 0; i < 4; ++i) {
          matmul(views[i], xs[i].data(), ms[i], apart[i].data(), scratch.data(), three);
          items.push_back({&views[i], i == 1 ? items[0].x : xs[i].data(), ms[i], together[i].data()});
        }
        matmul_grouped(items, scratch.data(), three);
        for (size_t i = 0; i < 4; ++i)
          EXPECT_TRUE(same_bits(apart[i], together[i]))
              << dtype_name(t) << " matrix " << i << " m " << ms[i] << (mixed ? " mixed" : "");
      }
    }
  }
  if (!ran) GTEST_SKIP() << "no packed kernels on this machine";
}

TEST(PackedGemm, GroupedMatmulOnPickedRowsEqualsCallsOnTheRowsCopied) {
  // A mixture of experts' prefill: experts pick their tokens' rows of one
  // batch (gate and up the same rows, one expert every row, one a single
  // row, rows repeated and out of order); the grouped call quantizes the
  // batch once and gathers blocks. The same bits as matmul on each
  // expert's rows copied out, for every packed type (float kernels copy
  // the rows), and with a file-layout matrix among them.
  ThreadPool three(3);
  const int64_t k = 512, n = 40;
  const std::vector<float> batch = random_floats(static_cast<size_t>(k * n), 77);
  std::vector<std::vector<int32_t>> picks = {{}, {}, {7}, {}};
  for (int32_t i = 0; i < n; i += 3) picks[0].push_back(n - 1 - i);
  picks[1] = picks[0];  // gate and up
  for (int32_t i = 0; i < 70; ++i) picks[3].push_back((i * 11) % n);
  const int64_t rows[] = {32, 32, 48, 64};
  bool ran = false;
  for (DType t : kPackedTypes) {
    FourMatrices four(t, k, rows, 80);
    if (!four.packs) continue;
    ran = true;
    std::vector<QuantMatrix>& ws = four.ws;
    std::vector<TensorView>& views = four.views;
    for (bool mixed : {false, true}) {
      if (mixed) views[2] = ws[2].view;
      std::vector<std::vector<float>> apart, together;
      std::vector<MatmulItem> items;
      int64_t total_m = 0;
      for (size_t i = 0; i < 4; ++i) {
        // Expert 2 reads the whole batch as it is (no rows picked).
        const int64_t m = i == 2 ? n : static_cast<int64_t>(picks[i].size());
        total_m += m;
        apart.emplace_back(static_cast<size_t>(rows[i] * m), NAN);
        together.emplace_back(static_cast<size_t>(rows[i] * m), NAN);
        if (i == 2) items.push_back({&views[i], batch.data(), m, together[i].data()});
        else items.push_back({&views[i], batch.data(), m, together[i].data(), picks[i].data(), n});
      }
      std::vector<uint8_t> scratch(grouped_scratch_bytes(views[0], total_m, n) +
                                   activation_scratch_bytes(ws[2].view, n));
      for (size_t i = 0; i < 4; ++i) {
        std::vector<float> x = batch;
        if (i != 2) {
          x.clear();
          for (int32_t r : picks[i]) x.insert(x.end(), batch.begin() + r * k, batch.begin() + (r + 1) * k);
        }
        matmul(views[i], x.data(), items[i].m, apart[i].data(), scratch.data(), three);
      }
      matmul_grouped(items, scratch.data(), three);
      for (size_t i = 0; i < 4; ++i)
        EXPECT_TRUE(same_bits(apart[i], together[i])) << dtype_name(t) << " matrix " << i << (mixed ? " mixed" : "");
    }
  }
  if (!ran) GTEST_SKIP() << "no packed kernels on this machine";
}

TEST(PackedGemm, UnpackRowGivesBackTheFileRows) {
  // Layout only, so on any machine: every row of every packed type gives
  // back its file bytes.
  for (DType t : kPackedTypes) {
    const int64_t k = 512, rows = 48;
    const QuantMatrix w = random_matrix(t, k, rows, 21);
    std::vector<uint8_t> packed(packed_bytes(w.view));
    pack_weights(w.view, packed.data());
    TensorView pv = w.view;
    pv.data = packed.data();
    pv.packed = true;
    std::vector<uint8_t> row(*row_bytes(t, k));
    for (int64_t r = 0; r < rows; ++r) {
      unpack_row(pv, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), w.view.row(r), row.size()), 0) << dtype_name(t) << " row " << r;
    }
  }
}

}  // namespace
}  // namespace duet
