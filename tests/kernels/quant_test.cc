// Quantized block types: SIMD kernels against the scalar reference at every
// CPU level this machine runs, quantization error bounds, and known answers
// decoded by hand from the documented GGUF layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernel_test_util.h"
#include "kernels/quant.h"
#include "kernels/registry.h"
#include "test_util.h"

namespace duet {
namespace {

using Bytes = std::vector<uint8_t>;

// Weight types and the activation type their dot product takes.
struct Pair {
  DType w, act;
};
constexpr Pair kPairs[] = {{DType::Q8_0, DType::Q8_0}, {DType::Q4_0, DType::Q8_0},
                           {DType::Q4_1, DType::Q8_1}, {DType::Q4_K, DType::Q8_K},
                           {DType::Q5_K, DType::Q8_K}, {DType::Q6_K, DType::Q8_K},
                           {DType::Q5_0, DType::Q8_0}, {DType::Q5_1, DType::Q8_1},
                           {DType::IQ4_NL, DType::Q8_0}, {DType::Q2_K, DType::Q8_K},
                           {DType::Q3_K, DType::Q8_K}, {DType::IQ4_XS, DType::Q8_K},
                           {DType::TQ1_0, DType::Q8_K}, {DType::TQ2_0, DType::Q8_K},
                           {DType::IQ3_S, DType::Q8_K}};

using testing::runnable_levels;

int64_t block_elems(DType t) { return traits(t).block_elems; }
size_t bytes_of(DType t, int64_t k) { return *row_bytes(t, k); }

void put_f16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }
void put_f16(uint8_t* p, float f) { put_f16(p, f32_to_f16(f)); }

std::vector<float> dequant(DType t, const Bytes& row, int64_t k) {
  std::vector<float> y(k);
  EXPECT_TRUE(dequantize_row(t, row.data(), y.data(), k).ok());
  return y;
}

// ---- Random blocks ---------------------------------------------------------------

struct Rng {
  std::mt19937 gen;
  explicit Rng(uint32_t seed) : gen(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); }
  float normal() { return std::normal_distribution<float>(0.f, 1.f)(gen); }
  // A scale from ordinary values to the ends of the f16 range.
  uint16_t f16_scale(bool allow_negative) {
    static const uint16_t kExtremes[] = {0x7BFF /*65504*/, 0x0001 /*6e-8*/, 0x0400 /*6e-5*/,
                                         0x0000};
    uint16_t h = uniform(0, 5) == 0 ? kExtremes[uniform(0, 3)]
                                    : f32_to_f16(std::exp(uniform(-7.f, 2.f)));
    if (allow_negative && uniform(0, 1)) h |= 0x8000;
    return h;
  }
};

// `exact`: all scales 2^-8 (or small multiples of it), so every product and
// partial sum below 2^8 is exact in float, whatever the order of additions.
constexpr float kExactUnit = 1.f / 256.f;

Bytes random_weights(DType t, int nb, Rng& rng, bool exact) {
  const size_t bb = traits(t).block_bytes;
  Bytes row(nb * bb);
  for (auto& b : row) b = static_cast<uint8_t>(rng.uniform(0, 255));
  const uint16_t unit = f32_to_f16(kExactUnit);
  for (int i = 0; i < nb; ++i) {
    uint8_t* blk = row.data() + i * bb;
    switch (t) {
      case DType::Q8_0:
      case DType::Q4_0:
      case DType::Q5_0:
      case DType::IQ4_NL: put_f16(blk, exact ? unit : rng.f16_scale(true)); break;
      case DType::IQ4_XS:
        put_f16(blk, exact ? unit : rng.f16_scale(true));
        // Sub-block scales 0..15 (high bits 2, less 32) keep exact sums small.
        if (exact) put_f16(blk + 2, static_cast<uint16_t>(0xAAAA));
        break;
      case DType::Q4_1:
      case DType::Q5_1:
        put_f16(blk, exact ? unit : rng.f16_scale(true));
        put_f16(blk + 2, exact ? rng.uniform(-64, 64) * kExactUnit : rng.uniform(-2.f, 2.f));
        break;
      case DType::Q4_K:
      case DType::Q5_K:  // d, dmin >= 0 as quantizers write them
        put_f16(blk, exact ? unit : rng.f16_scale(false));
        put_f16(blk + 2, exact ? unit : rng.f16_scale(false));
        break;
      case DType::Q6_K: put_f16(blk + 208, exact ? unit : rng.f16_scale(true)); break;
      case DType::Q2_K:  // d, dmin >= 0 as quantizers write them
        put_f16(blk + 80, exact ? unit : rng.f16_scale(false));
        put_f16(blk + 82, exact ? unit : rng.f16_scale(false));
        break;
      case DType::Q3_K: put_f16(blk + 108, exact ? unit : rng.f16_scale(true)); break;
      case DType::TQ1_0: put_f16(blk + 52, exact ? unit : rng.f16_scale(true)); break;
      case DType::TQ2_0: put_f16(blk + 64, exact ? unit : rng.f16_scale(true)); break;
      case DType::IQ3_S:
        put_f16(blk, exact ? unit : rng.f16_scale(true));
        if (exact) std::memset(blk + 106, 0, 4);  // sub-block factors 1: magnitudes up to 15
        break;
      default: ADD_FAILURE() << "no weights of " << dtype_name(t);
    }
  }
  return row;
}

// In exact mode mostly small, so that whole rows stay exactly summable in
// float, with every 16th at the extremes.
int8_t act_quant(Rng& rng, bool exact, int i) {
  if (!exact) return static_cast<int8_t>(rng.uniform(-127, 127));
  if (i % 16 == 0) return rng.uniform(0, 1) ? 127 : -127;
  return static_cast<int8_t>(rng.uniform(-31, 31));
}

// Activation quants lie in [-127, 127] (the quantizers never write -128);
// the sums Q8_1 and Q8_K carry are consistent with them.
Bytes random_activations(DType t, int nb, Rng& rng, bool exact) {
  const size_t bb = traits(t).block_bytes;
  Bytes row(nb * bb);
  for (int i = 0; i < nb; ++i) {
    uint8_t* blk = row.data() + i * bb;
    if (t == DType::Q8_K) {
      BlockQ8_K b;
      b.d = exact ? kExactUnit : std::exp(rng.uniform(-40.f, 40.f));
      if (!exact && rng.uniform(0, 1)) b.d = -b.d;
      for (int l = 0; l < kQKK; ++l) b.qs[l] = act_quant(rng, exact, l);
      for (int j = 0; j < 16; ++j) {
        int s = 0;
        for (int l = 0; l < 16; ++l) s += b.qs[16 * j + l];
        b.bsums[j] = static_cast<int16_t>(s);
      }
      std::memcpy(blk, &b, sizeof b);
      continue;
    }
    const int off = t == DType::Q8_1 ? 4 : 2;
    int sum = 0;
    for (int l = 0; l < kQK32; ++l) {
      const int8_t q = act_quant(rng, exact, l);
      blk[off + l] = static_cast<uint8_t>(q);
      sum += q;
    }
    // Q8_1's f16 s = d * sum(q) would overflow with d near the f16 maximum.
    const uint16_t d = exact ? f32_to_f16(kExactUnit)
                       : t == DType::Q8_1 ? f32_to_f16(std::exp(rng.uniform(-7.f, 2.f)))
                                          : rng.f16_scale(true);
    put_f16(blk, d);
    if (t == DType::Q8_1) put_f16(blk + 2, sum * f16_to_f32(d));
  }
  return row;
}

// sum_i |w_i| |x_i| with every term of the weight's formula counted
// positively (d*q and the min/offset separately), in double: the scale of
// the rounding error any summation order can make.
double magnitude(DType t, Bytes w, const Bytes& x, DType xt, int64_t k) {
  const size_t bb = traits(t).block_bytes;
  for (size_t i = 0; i < w.size() / bb; ++i) {
    uint8_t* blk = w.data() + i * bb;
    auto set_sign = [](uint8_t* p, bool negative) {
      p[1] = static_cast<uint8_t>(negative ? (p[1] | 0x80) : (p[1] & 0x7F));
    };
    if (t == DType::Q4_1 || t == DType::Q5_1) {  // q*|d| + |m|
      set_sign(blk, false);
      set_sign(blk + 2, false);
    } else if (t == DType::Q4_K || t == DType::Q5_K) {  // |d|*sc*q + |dmin|*m
      set_sign(blk, false);
      set_sign(blk + 2, true);
    } else if (t == DType::Q2_K) {
      set_sign(blk + 80, false);
      set_sign(blk + 82, true);
    }
  }
  const std::vector<float> wf = dequant(t, w, k), xf = dequant(xt, x, k);
  double m = 0;
  for (int64_t i = 0; i < k; ++i) m += std::fabs(static_cast<double>(wf[i]) * xf[i]);
  return m;
}

// Q8_1 carries s = d * sum(q) rounded to f16, which the dot products of
// Q4_1 and Q5_1 use for the min term: off from the dequantized sum by up to
// 2^-11 of |m * s|. Both weight blocks hold m at byte 2.
double q8_1_sum_slack(DType t, DType act, const Bytes& w, const Bytes& x) {
  if (act != DType::Q8_1) return 0;
  const size_t wb = traits(t).block_bytes;
  double slack = 0;
  for (size_t b = 0; b < w.size() / wb; ++b) {
    uint16_t m;
    BlockQ8_1 xb;
    std::memcpy(&m, w.data() + b * wb + 2, 2);
    std::memcpy(&xb, x.data() + b * sizeof xb, sizeof xb);
    slack += std::fabs(static_cast<double>(f16_to_f32(m)) * f16_to_f32(xb.s)) / 2048;
  }
  return slack;
}

double dequant_dot(DType t, const Bytes& w, DType xt, const Bytes& x, int64_t k) {
  const std::vector<float> wf = dequant(t, w, k), xf = dequant(xt, x, k);
  double s = 0;
  for (int64_t i = 0; i < k; ++i) s += static_cast<double>(wf[i]) * xf[i];
  return s;
}

// ---- SIMD against scalar ----------------------------------------------------------

TEST(QuantKernels, TablesCoverTheQuantizedTypes) {
  for (const Pair& p : kPairs) {
    for (CpuLevel level : runnable_levels()) {
      const TypeKernels* tk = kernels_at(level).type(p.w);
      ASSERT_NE(tk, nullptr) << dtype_name(p.w);
      EXPECT_EQ(tk->vec_dot_type, p.act);
      EXPECT_TRUE(tk->from_float && tk->vec_dot && tk->to_float);
    }
  }
}

// Float results: the scalar kernel and each SIMD one compute the same exact
// integers per block and differ only in float rounding, which for up to 9
// blocks is a few float epsilons (6e-8) of the sum of |terms|; 1e-6 of it is
// a tight bound that still allows any summation order.
TEST(QuantKernels, VecDotMatchesScalarOnRandomBlocks) {
  Rng rng(1234);
  for (const Pair& p : kPairs) {
    const TypeKernels* ref = kernels_at(CpuLevel::kScalar).type(p.w);
    for (int trial = 0; trial < 200; ++trial) {
      const int nb = 1 + trial % 9;
      const int64_t k = nb * block_elems(p.w);
      const Bytes w = random_weights(p.w, nb, rng, false);
      const Bytes x = random_activations(p.act, nb, rng, false);
      const float want = ref->vec_dot(k, w.data(), x.data());
      const double mag = magnitude(p.w, w, x, p.act, k);
      const double tol = 1e-6 * mag + 1e-30;
      ASSERT_TRUE(std::isfinite(want) && std::isfinite(mag));
      // The scalar kernel itself agrees with dequantize-then-multiply.
      ASSERT_NEAR(want, dequant_dot(p.w, w, p.act, x, k), tol + q8_1_sum_slack(p.w, p.act, w, x))
          << dtype_name(p.w) << " trial " << trial;
      for (CpuLevel level : runnable_levels()) {
        const float got = kernels_at(level).type(p.w)->vec_dot(k, w.data(), x.data());
        ASSERT_NEAR(got, want, tol)
            << dtype_name(p.w) << " at " << cpu_level_name(level) << ", trial " << trial;
      }
    }
  }
}

// The blocked dots (prefill) of the mix types, at awkward row, token and
// block counts: each (row, token) result has the bits of the level's own
// vec_dot (the same sums in the same order), which the tests above hold to
// the scalar twin.
TEST(QuantKernels, MixDotBlockEqualsVecDot) {
  Rng rng(4321);
  const DType kMix[] = {DType::Q5_0,   DType::Q5_1,  DType::IQ4_NL, DType::Q2_K, DType::Q3_K,
                        DType::IQ4_XS, DType::TQ1_0, DType::TQ2_0,  DType::IQ3_S};
  for (DType t : kMix) {
    for (CpuLevel level : runnable_levels()) {
      const TypeKernels* tk = kernels_at(level).type(t);
      ASSERT_NE(tk, nullptr);
      if (level == CpuLevel::kScalar) continue;  // matmul takes vec_dot there
      ASSERT_NE(tk->dot_block, nullptr) << dtype_name(t) << " at " << cpu_level_name(level);
      for (const auto& [nb, n_rows, n_tok] : {std::tuple{1, 1, 1}, {3, 5, 9}, {7, 3, 4}, {2, 2, 5}, {5, 1, 3}}) {
        const int64_t k = nb * block_elems(t);
        const size_t w_bytes = bytes_of(t, k), x_bytes = bytes_of(tk->vec_dot_type, k);
        Bytes w, x;
        for (int r = 0; r < n_rows; ++r) {
          const Bytes row = random_weights(t, nb, rng, false);
          w.insert(w.end(), row.begin(), row.end());
        }
        for (int i = 0; i < n_tok; ++i) {
          const Bytes row = random_activations(tk->vec_dot_type, nb, rng, false);
          x.insert(x.end(), row.begin(), row.end());
        }
        const int64_t y_stride = n_rows + 2;  // rows of y wider than the block's
        std::vector<float> y(static_cast<size_t>(n_tok * y_stride), NAN);
        tk->dot_block(k, w.data(), w_bytes, n_rows, x.data(), x_bytes, n_tok, y.data(), y_stride);
        for (int i = 0; i < n_tok; ++i)
          for (int r = 0; r < n_rows; ++r) {
            const float want = tk->vec_dot(k, w.data() + r * w_bytes, x.data() + i * x_bytes);
            ASSERT_EQ(f32_to_bits(y[i * y_stride + r]), f32_to_bits(want))
                << dtype_name(t) << " at " << cpu_level_name(level) << ": nb " << nb << " row " << r << " token " << i;
          }
        for (int i = 0; i < n_tok; ++i)  // nothing written between the rows of y
          EXPECT_TRUE(std::isnan(y[i * y_stride + n_rows]) && std::isnan(y[i * y_stride + n_rows + 1]));
      }
    }
  }
}

// With power-of-two scales nothing rounds, so any difference in the integer
// parts of a kernel would show; all levels must equal the exact value.
TEST(QuantKernels, VecDotIntegerPartsExact) {
  Rng rng(99);
  for (const Pair& p : kPairs) {
    for (int trial = 0; trial < 100; ++trial) {
      const int nb = 1 + trial % (block_elems(p.w) == kQKK ? 2 : 9);
      const int64_t k = nb * block_elems(p.w);
      const Bytes w = random_weights(p.w, nb, rng, true);
      const Bytes x = random_activations(p.act, nb, rng, true);
      // Every term is a multiple of 2^-16; below 2^8 in total, float is exact.
      ASSERT_LT(magnitude(p.w, w, x, p.act, k), 256.0) << "test data too large to be exact";
      const double exact = dequant_dot(p.w, w, p.act, x, k);
      for (CpuLevel level : runnable_levels()) {
        const float got = kernels_at(level).type(p.w)->vec_dot(k, w.data(), x.data());
        ASSERT_EQ(got, static_cast<float>(exact))
            << dtype_name(p.w) << " at " << cpu_level_name(level) << ", trial " << trial;
        ASSERT_EQ(static_cast<double>(got), exact);
      }
    }
  }
}

// Rows of activations: Gaussian at scales from 1e-30 to 1e30, plus blocks of
// zeros, exact halves (the rounding rules differ there) and +-max ties.
std::vector<float> activation_row(Rng& rng, int64_t k, int trial) {
  static const float kScales[] = {1.f, 1e-30f, 1e30f, 1e-3f, 1e3f, 65504.f / 127.f};
  const float scale = kScales[trial % 6];
  std::vector<float> x(k);
  for (auto& v : x) v = rng.normal() * scale;
  switch (trial % 5) {
    case 1:  // a zero block
      std::fill(x.begin(), x.begin() + std::min<int64_t>(k, kQKK), 0.f);
      break;
    case 2:  // halves with step 1: max 127 (or -127) makes the scale exactly 1
      for (int64_t i = 0; i < k; ++i) x[i] = static_cast<float>(i % 200) - 99.5f;
      for (int64_t i = 0; i < k; i += kQK32) x[i] = (i / kQK32) % 2 ? 127.f : -127.f;
      break;
    case 3:  // +a and -a both the largest
      x[3] = 4.f * scale * 10;
      x[k - 7] = -4.f * scale * 10;
      break;
    default: break;
  }
  return x;
}

TEST(QuantKernels, FromFloatMatchesScalarBitForBit) {
  Rng rng(7);
  for (DType w : {DType::Q8_0, DType::Q4_1, DType::Q4_K}) {  // -> Q8_0, Q8_1, Q8_K
    const TypeKernels* ref = kernels_at(CpuLevel::kScalar).type(w);
    const DType act = ref->vec_dot_type;
    for (int trial = 0; trial < 120; ++trial) {
      const int64_t k = (1 + trial % 9) * kQKK;
      const std::vector<float> x = activation_row(rng, k, trial);
      Bytes want(bytes_of(act, k)), got(bytes_of(act, k));
      ref->from_float(x.data(), want.data(), k);
      for (CpuLevel level : runnable_levels()) {
        std::fill(got.begin(), got.end(), 0xAB);
        kernels_at(level).type(w)->from_float(x.data(), got.data(), k);
        ASSERT_EQ(got, want) << dtype_name(act) << " at " << cpu_level_name(level) << ", trial "
                             << trial;
      }
    }
  }
}

// ---- Quantization quality ------------------------------------------------------------

double rel_rms_error(DType t, const std::vector<float>& x, const float* importance = nullptr,
                     const std::vector<float>* metric_weights = nullptr) {
  const int64_t k = static_cast<int64_t>(x.size());
  Bytes q(bytes_of(t, k));
  EXPECT_TRUE(quantize_row(t, x.data(), q.data(), k, importance).ok());
  const std::vector<float> y = dequant(t, q, k);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double w = metric_weights ? (*metric_weights)[i] : 1.0;
    err += w * (y[i] - x[i]) * (y[i] - x[i]);
    ref += w * x[i] * x[i];
  }
  return std::sqrt(err / ref);
}

std::vector<float> gaussian(int64_t k, uint32_t seed) {
  Rng rng(seed);
  std::vector<float> x(k);
  for (auto& v : x) v = rng.normal();
  return x;
}

// Relative RMS error on N(0,1) data (64K values). Measured: Q8_0/Q8_1 0.540%,
// Q8_K 0.704%, Q4_0 8.63%, Q4_1 7.87%, Q4_K 7.20%, Q5_K 3.64%, Q6_K 1.78%.
// They agree with step/sqrt(12) for a uniform quantizer: e.g. Q8_0's step is
// amax/127 with amax ~2.1 sigma over 32 values -> 0.48%, plus rounding of d
// to f16; Q6_K's is ~2*1.77/63 over 16 values -> 1.6%; each extra bit halves
// the error (Q4_K -> Q5_K -> Q6_K). Measured for the mix types: Q5_0 4.28%,
// Q5_1 3.80%, Q2_K 27.6%, Q3_K 15.3%, IQ4_NL 7.64%, IQ4_XS 7.69%, TQ1_0 and
// TQ2_0 81.3% (see TernaryTypesRoundTripTernaryData). The bounds sit ~10%
// above the measured values: a broken scale search or rounding rule shows,
// float noise does not.
TEST(Quant, RoundTripErrorOnGaussianData) {
  const std::vector<float> x = gaussian(1 << 16, 42);
  struct Bound {
    DType t;
    double max_rel_rms;
  };
  for (const Bound& b : {Bound{DType::Q8_0, 0.0060}, Bound{DType::Q8_1, 0.0060},
                         Bound{DType::Q8_K, 0.0078}, Bound{DType::Q4_0, 0.095},
                         Bound{DType::Q4_1, 0.087}, Bound{DType::Q4_K, 0.079},
                         Bound{DType::Q5_K, 0.040}, Bound{DType::Q6_K, 0.0195},
                         Bound{DType::Q5_0, 0.047}, Bound{DType::Q5_1, 0.042},
                         Bound{DType::Q2_K, 0.30}, Bound{DType::Q3_K, 0.168},
                         Bound{DType::IQ4_NL, 0.084}, Bound{DType::IQ4_XS, 0.085},
                         Bound{DType::TQ1_0, 0.85}, Bound{DType::TQ2_0, 0.85}}) {
    const double e = rel_rms_error(b.t, x);
    EXPECT_LT(e, b.max_rel_rms) << dtype_name(b.t);
    std::printf("  %-5s relative RMS error %.3f%%\n", std::string(dtype_name(b.t)).c_str(),
                100 * e);
  }
  // The searched scale and min of Q4_K beat Q4_1's plain min/max, even with
  // scales and mins rounded to 6 bits.
  EXPECT_LT(rel_rms_error(DType::Q4_K, x), rel_rms_error(DType::Q4_1, x));
  // IQ4's grid, denser near zero, beats Q4_0's even steps on bell-shaped data.
  EXPECT_LT(rel_rms_error(DType::IQ4_NL, x), rel_rms_error(DType::Q4_0, x));
  EXPECT_LT(rel_rms_error(DType::Q3_K, x), 0.6 * rel_rms_error(DType::Q2_K, x));
}

// The ternary types lose most of a Gaussian (d = max|x| rounds nearly all of
// it to 0: 81 % measured), so their real check is data that is ternary: it
// must come back exactly, and so must zero blocks.
TEST(Quant, TernaryTypesRoundTripTernaryData) {
  Rng rng(31);
  const int64_t k = 4 * kQKK;
  std::vector<float> x(k);
  for (int64_t i = 0; i < k; ++i) x[i] = 0.375f * static_cast<float>(rng.uniform(-1, 1));
  x[5] = 0.375f;  // every block has its scale
  for (int64_t b = 1; b < 4; ++b) x[b * kQKK] = -0.375f;
  std::fill(x.begin() + 3 * kQKK, x.end(), 0.f);
  for (DType t : {DType::TQ1_0, DType::TQ2_0}) {
    Bytes q(bytes_of(t, k));
    ASSERT_TRUE(quantize_row(t, x.data(), q.data(), k).ok());
    EXPECT_EQ(dequant(t, q, k), x) << dtype_name(t);
  }
}

// Importance moves the error to where it matters: weighted by importance, the
// error with it is clearly lower than without it.
TEST(Quant, ImportanceLowersWeightedError) {
  const int64_t k = 1 << 14;
  const std::vector<float> x = gaussian(k, 5);
  Rng rng(6);
  std::vector<float> imp(k);
  for (auto& v : imp) v = rng.uniform(0, 7) == 0 ? 50.f : 0.2f;  // a few columns dominate
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS}) {
    const double plain = rel_rms_error(t, x, nullptr, &imp);
    const double aware = rel_rms_error(t, x, imp.data(), &imp);
    EXPECT_LT(aware, 0.9 * plain) << dtype_name(t);
  }
}

// The same input always gives the same bytes, and quantizing the
// dequantized values again reproduces the blocks for the fixed-rule types.
TEST(Quant, Reproducible) {
  const int64_t k = 4096;
  const std::vector<float> x = gaussian(k, 77);
  for (DType t : {DType::Q8_0, DType::Q8_1, DType::Q4_0, DType::Q4_1, DType::Q8_K, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                  DType::IQ4_NL, DType::IQ4_XS, DType::TQ1_0, DType::TQ2_0}) {
    Bytes a(bytes_of(t, k)), b(bytes_of(t, k));
    ASSERT_TRUE(quantize_row(t, x.data(), a.data(), k).ok());
    ASSERT_TRUE(quantize_row(t, x.data(), b.data(), k).ok());
    EXPECT_EQ(a, b) << dtype_name(t);
    const std::vector<float> y = dequant(t, a, k);
    EXPECT_EQ(y, dequant(t, b, k));
    if (t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_0) {
      Bytes again(bytes_of(t, k));
      ASSERT_TRUE(quantize_row(t, y.data(), again.data(), k).ok());
      EXPECT_EQ(again, a) << dtype_name(t) << ": not idempotent";
    }
  }
}

TEST(Quant, RejectsBadRows) {
  std::vector<float> x(100);
  Bytes y(1000);
  EXPECT_FALSE(quantize_row(DType::Q4_K, x.data(), y.data(), 100).ok());
  EXPECT_FALSE(quantize_row(DType::Q8_0, x.data(), y.data(), 33).ok());
  EXPECT_FALSE(quantize_row(DType::F32, x.data(), y.data(), 32).ok());
  x[40] = std::nanf("");
  EXPECT_FALSE(quantize_row(DType::Q8_0, x.data(), y.data(), 64).ok());
  x[40] = 0.f;
  x[70] = -INFINITY;
  EXPECT_FALSE(quantize_row(DType::Q4_0, x.data(), y.data(), 96).ok());
  EXPECT_TRUE(quantize_row(DType::Q4_0, x.data(), y.data(), 64).ok());
  std::vector<float> out(256);
  EXPECT_FALSE(dequantize_row(DType::I16, y.data(), out.data(), 256).ok());  // not a block type
  EXPECT_FALSE(quantize_row(DType::IQ3_S, out.data(), y.data(), 256).ok());  // read, never written
  EXPECT_TRUE(dequantizable(DType::IQ3_S));
  EXPECT_FALSE(dequantize_row(DType::Q5_0, y.data(), out.data(), 48).ok());  // 48 is not whole blocks
}

// ---- Known answers -------------------------------------------------------------------

// One Block quantized from n zeros but for the given (index, value) elements.
template <class Block>
Block quantize_sparse(void (*quantize)(const float*, void*, int64_t), int64_t n,
                      std::initializer_list<std::pair<int, float>> elements) {
  std::vector<float> x(static_cast<size_t>(n), 0.f);
  for (const auto& [i, v] : elements) x[static_cast<size_t>(i)] = v;
  Block b;
  quantize(x.data(), &b, n);
  return b;
}

// The first quants of a block are `want`.
template <class Q>
void expect_leading(const Q* qs, std::initializer_list<int> want) {
  int i = 0;
  for (int w : want) {
    EXPECT_EQ(qs[i], w) << "element " << i;
    ++i;
  }
}

TEST(QuantKnownAnswer, Q8_0RoundsHalfAwayFromZero) {
  // amax 127 -> d = 1 exactly, so x/d keeps the halves.
  const auto b =
      quantize_sparse<BlockQ8_0>(quantize_row_q8_0, 32, {{0, 127.f}, {1, 2.5f}, {2, -3.5f}, {3, 0.5f}, {4, -0.49f}});
  EXPECT_EQ(b.d, 0x3C00);  // 1.0
  expect_leading(b.qs, {127, 3, -4, 1, 0});
}

TEST(QuantKnownAnswer, Q8_KRoundsHalfToEven) {
  // max = -127 -> iscale = 1, d = 1.
  const auto b = quantize_sparse<BlockQ8_K>(quantize_row_q8_K, 256,
                                            {{0, -127.f}, {1, 2.5f}, {2, 3.5f}, {3, -2.5f}, {17, 100.f}});
  EXPECT_EQ(b.d, 1.f);
  expect_leading(b.qs, {-127, 2, 4, -2});
  expect_leading(b.bsums, {-127 + 2 + 4 - 2, 100});
}

TEST(QuantKnownAnswer, Q4_0) {
  // The largest-magnitude element is -8: d = -8/-8 = 1, it maps to level 0.
  auto b = quantize_sparse<BlockQ4_0>(quantize_row_q4_0, 32, {{0, -8.f}, {1, 7.f}, {2, 0.5f}, {3, -0.5f}, {16, 3.f}});
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[0], 0x00 | (11 << 4));  // element 0 -> 0; element 16: 3 + 8 = 11
  EXPECT_EQ(b.qs[1], 15 | (8 << 4));     // 7 + 8 = 15; element 17: 0 -> 8
  EXPECT_EQ(b.qs[2] & 0xF, 9);           // trunc(0.5 + 8.5) = 9
  EXPECT_EQ(b.qs[3] & 0xF, 8);           // trunc(-0.5 + 8.5) = 8
  // Decoding: (q - 8) * d with d = 0.5.
  b.d = 0x3800;
  b.qs[5] = 0x9F;  // element 5: 15 - 8 = 7; element 21: 9 - 8 = 1
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  EXPECT_EQ(y[5], 3.5f);
  EXPECT_EQ(y[21], 0.5f);
  EXPECT_EQ(y[0], -4.f);
}

TEST(QuantKnownAnswer, Q4_KPackedScales) {
  BlockQ4_K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  const uint8_t scales[12] = {0x41, 0x02, 0x03, 0x04, 0x85, 0x06, 0x07, 0x08,
                              0x21, 0x43, 0x65, 0x87};
  std::memcpy(b.scales, scales, 12);
  // Sub-block 0: sc = 0x41 & 63 = 1, m = 0x85 & 63 = 5.
  // Sub-block 1: sc = 2, m = 6.
  // Sub-block 4: sc = (0x21 & 15) | (0x41 >> 6) << 4 = 1 | 16 = 17,
  //              m = (0x21 >> 4) | (0x85 >> 6) << 4 = 2 | 32 = 34.
  // Sub-block 5: sc = (0x43 & 15) | (0x02 >> 6) << 4 = 3, m = 4 | 0 = 4.
  b.qs[0] = 0x3A;   // element 0 (sub-block 0): 10; element 32 (sub-block 1): 3
  b.qs[64] = 0xF1;  // element 128 (sub-block 4): 1; element 160 (sub-block 5): 15
  float y[256];
  dequantize_row_q4_K(&b, y, 256);
  EXPECT_EQ(y[0], 1.f * 10 - 0.5f * 5);    // 7.5
  EXPECT_EQ(y[32], 2.f * 3 - 0.5f * 6);    // 3
  EXPECT_EQ(y[128], 17.f * 1 - 0.5f * 34); // 0
  EXPECT_EQ(y[160], 3.f * 15 - 0.5f * 4);  // 43
  EXPECT_EQ(y[1], -2.5f);                  // q = 0: just the min
  EXPECT_EQ(y[129], -17.f);
}

TEST(QuantKnownAnswer, Q5_KHighBits) {
  BlockQ5_K b{};
  b.d = 0x3C00;  // 1.0, dmin 0
  std::memset(b.scales, 0, 12);
  b.scales[2] = 1;  // sub-block 2 (elements 64..95): sc = 1
  b.scales[3] = 2;  // sub-block 3 (elements 96..127): sc = 2
  b.qs[32 + 5] = 0x73;  // element 69: low 3; element 101: low 7
  b.qh[5] = 0x04 | 0x08;  // bit 2 -> element 69 gets +16, bit 3 -> element 101
  float y[256];
  dequantize_row_q5_K(&b, y, 256);
  EXPECT_EQ(y[69], 19.f);
  EXPECT_EQ(y[101], 2.f * 23);
  EXPECT_EQ(y[70], 0.f);
}

TEST(QuantKnownAnswer, Q6_KLayout) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j + 1);
  b.scales[4] = -3;
  b.ql[0] = 0x21;   // element 0 low 1; element 64 low 2
  b.ql[32] = 0x43;  // element 32 low 3; element 96 low 4
  b.qh[0] = 0xE4;   // 0b11'10'01'00: element 0 high 0, 32 high 1, 64 high 2, 96 high 3
  b.ql[64 + 17] = 0x05;  // second half, element 128 + 17 = 145 low 5
  b.qh[32 + 17] = 0x02;  // its high bits 2 -> q = 32 + 5 = 37
  float y[256];
  dequantize_row_q6_K(&b, y, 256);
  EXPECT_EQ(y[0], 0.5f * 1 * (1 - 32));            // sub-block 0
  EXPECT_EQ(y[32], 0.5f * 3 * ((3 | 16) - 32));    // sub-block 2
  EXPECT_EQ(y[64], 0.5f * -3 * ((2 | 32) - 32));   // sub-block 4
  EXPECT_EQ(y[96], 0.5f * 7 * ((4 | 48) - 32));    // sub-block 6
  EXPECT_EQ(y[145], 0.5f * 10 * (37 - 32));        // sub-block 9
  EXPECT_EQ(y[1], 0.5f * 1 * -32);                 // all-zero quant
}

// A dot product computed by hand: Q4_0 weights (d = 0.5) against Q8_0
// activations (d = 0.25) over one block.
TEST(QuantKnownAnswer, Q4_0DotQ8_0) {
  BlockQ4_0 w{};
  w.d = 0x3800;
  std::memset(w.qs, 0x88, 16);  // all levels 8 -> 0
  w.qs[0] = 0x8A;               // element 0: 10 - 8 = 2
  w.qs[3] = 0x18;               // element 19: 1 - 8 = -7
  BlockQ8_0 x{};
  x.d = 0x3400;  // 0.25
  x.qs[0] = 100;
  x.qs[19] = -3;
  x.qs[5] = 127;  // meets a zero weight
  const float want = 0.5f * 0.25f * (2 * 100 + (-7) * (-3));  // 27.625
  for (CpuLevel level : runnable_levels())
    EXPECT_EQ(kernels_at(level).type(DType::Q4_0)->vec_dot(32, &w, &x), want)
        << cpu_level_name(level);
}

// ---- Independent decoder ---------------------------------------------------------------

// tests/reference/quant_numpy.py decodes blocks from the layout description
// alone; it must give the same float bits as dequantize_row, on random
// blocks and on blocks from the quantizers.
TEST(QuantReference, NumpyDequantizerAgreesBitForBit) {
  testing::TempDir dir;
  Rng rng(2024);
  struct Case {
    DType t;
    std::string name;
    Bytes blocks;
  };
  std::vector<Case> cases;
  std::string cmd = "/usr/bin/python3 " DUET_SOURCE_DIR "/tests/reference/quant_numpy.py";
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q8_K, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K}) {
    const int nb = 9;
    const int64_t k = nb * block_elems(t);
    Case c{t, std::string(dtype_name(t)),
           t == DType::Q8_K ? random_activations(t, nb, rng, false)
                            : random_weights(t, nb, rng, false)};
    Bytes quantized(bytes_of(t, k));
    const std::vector<float> x = gaussian(k, 11);
    ASSERT_TRUE(quantize_row(t, x.data(), quantized.data(), k).ok());
    c.blocks.insert(c.blocks.end(), quantized.begin(), quantized.end());
    for (char& ch : c.name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::ofstream(dir.file(c.name + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(c.blocks.data()),
               static_cast<std::streamsize>(c.blocks.size()));
    cmd += " " + c.name + " " + dir.file(c.name + ".bin") + " " + dir.file(c.name + ".f32");
    cases.push_back(std::move(c));
  }
  const auto r = testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  for (const Case& c : cases) {
    const int64_t n = static_cast<int64_t>(c.blocks.size() / traits(c.t).block_bytes) *
                      block_elems(c.t);
    std::vector<uint32_t> theirs(n), ours(n);
    std::ifstream f(dir.file(c.name + ".f32"), std::ios::binary);
    f.read(reinterpret_cast<char*>(theirs.data()), static_cast<std::streamsize>(n * 4));
    ASSERT_EQ(f.gcount(), n * 4) << c.name;
    const std::vector<float> y = dequant(c.t, c.blocks, n);
    std::memcpy(ours.data(), y.data(), n * 4);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(ours[i], theirs[i]) << c.name << " element " << i << ": " << y[i] << " vs "
                                    << bits_to_f32(theirs[i]);
  }
}

}  // namespace
}  // namespace duet
