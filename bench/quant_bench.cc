// vec_dot of the quantized types over a 5632 x 2048 weight matrix (the FFN
// up projection of a 1.1B Llama), one activation row, one thread: the decode
// inner loop. Reports weight bytes per second per type and CPU level.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/quant.h"
#include "kernels/packed_gemm.h"
#include "kernels/registry.h"

namespace duet {
namespace {

constexpr int64_t kRows = 5632, kCols = 2048;

// Random quants with sane scales; the kernels' speed does not depend on values.
std::vector<uint8_t> random_matrix(DType t) {
  const size_t row = *row_bytes(t, kCols);
  std::vector<uint8_t> m(row * kRows);
  std::mt19937 gen(1);
  for (auto& b : m) b = static_cast<uint8_t>(gen());
  // Every f16 field (d, and dmin or m where the type has one) set to 0.01:
  // random bits would include NaNs and subnormals.
  const size_t bb = traits(t).block_bytes;
  const uint16_t d = f32_to_f16(0.01f);
  const bool two = t == DType::Q4_1 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q5_1 || t == DType::Q2_K;
  size_t d_at = 0;  // where the block's (first) f16 field is
  switch (t) {
    case DType::Q6_K: d_at = 208; break;
    case DType::Q2_K: d_at = 80; break;
    case DType::Q3_K: d_at = 108; break;
    case DType::TQ1_0: d_at = 52; break;
    case DType::TQ2_0: d_at = 64; break;
    default: break;
  }
  for (size_t off = 0; off < m.size(); off += bb) {
    std::memcpy(&m[off + d_at], &d, 2);
    if (two) std::memcpy(&m[off + d_at + 2], &d, 2);
  }
  return m;
}

void BM_VecDot(benchmark::State& state, DType t, CpuLevel level) {
  const TypeKernels* tk = kernels_at(level).type(t);
  const std::vector<uint8_t> w = random_matrix(t);
  const size_t row = *row_bytes(t, kCols);
  std::vector<float> xf(kCols);
  std::mt19937 gen(2);
  std::normal_distribution<float> nd;
  for (auto& v : xf) v = nd(gen);
  std::vector<uint8_t> xq(*row_bytes(tk->vec_dot_type, kCols));
  tk->from_float(xf.data(), xq.data(), kCols);
  for (auto _ : state) {
    float sum = 0.f;
    for (int64_t r = 0; r < kRows; ++r) sum += tk->vec_dot(kCols, w.data() + r * row, xq.data());
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

// vec_dot over `copies` matrices side by side, row after row as a decode
// range does: 0 = the first 256 rows (L2), 1 = one matrix (L3), 8 = 8 matrices
// (52 MB of Q4_0, streamed from DRAM).
void BM_VecDotStream(benchmark::State& state, DType t, CpuLevel level, int copies) {
  const TypeKernels* tk = kernels_at(level).type(t);
  std::vector<uint8_t> w;
  for (int c = 0; c < (copies ? copies : 1); ++c) {
    const std::vector<uint8_t> one = random_matrix(t);
    w.insert(w.end(), one.begin(), one.end());
  }
  const size_t row = *row_bytes(t, kCols);
  const int64_t rows = copies ? kRows * copies : 256;
  std::vector<float> xf(kCols);
  std::mt19937 gen(2);
  std::normal_distribution<float> nd;
  for (auto& v : xf) v = nd(gen);
  std::vector<uint8_t> xq(*row_bytes(tk->vec_dot_type, kCols));
  tk->from_float(xf.data(), xq.data(), kCols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = tk->vec_dot(kCols, w.data() + r * row, xq.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * static_cast<int64_t>(row));
}

// The packed int8 GEMM (kernels/packed_gemm.h) on the same matrix, m tokens,
// one thread, in tiles of 112 rows as matmul hands them out: integer ops
// (2 per multiply-add) per second, to set against the int8 probe's peak.
void BM_PackedGemm(benchmark::State& state, DType t, CpuLevel level, int64_t m) {
  const PackedKernels* pk = kernels_at(level).packed(t);
  const std::vector<uint8_t> file = random_matrix(t);
  TensorView view;
  view.dtype = t;
  view.n_dims = 2;
  view.ne = {kCols, kRows, 1, 1};
  view.data = file.data();
  view.nbytes = file.size();
  std::vector<uint8_t> w(packed_bytes(view));
  pack_weights(view, w.data());
  std::mt19937 gen(2);
  std::normal_distribution<float> nd;
  std::vector<float> xf(static_cast<size_t>(kCols * m));
  for (auto& v : xf) v = nd(gen);
  const bool floats = pk->offset == kFloatActs;
  // f32 rows, or int8 blocks interleaved (xs: the block stride).
  const size_t xs = floats ? kCols * sizeof(float) : static_cast<size_t>(m) * sizeof(PackedActBlock);
  std::vector<uint8_t> xq((floats ? xs : packed_act_row_bytes(kCols)) * static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    if (floats)
      std::memcpy(xq.data() + i * xs, xf.data() + i * kCols, xs);
    else
      quantize_packed_act(xf.data() + i * kCols, xq.data() + i * sizeof(PackedActBlock), kCols, pk->offset, xs);
  std::vector<float> y(static_cast<size_t>(kRows * m));
  constexpr int64_t kTile = 112;
  const size_t group_bytes = w.size() / (kRows / kPackRows);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; r += kTile) {
      const int64_t n = kRows - r < kTile ? kRows - r : kTile;
      pk->gemm(kCols, w.data() + r / kPackRows * group_bytes, n / kPackRows, xq.data(), xs, m, y.data() + r, kRows);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GOP/s"] = benchmark::Counter(2.0 * kRows * kCols * static_cast<double>(m) * state.iterations() / 1e9,
                                               benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
}

const bool registered = [] {
  // The AVX-512 kernels keep their old names; the AVX2 ones get /avx2.
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::F16, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                  DType::IQ4_XS, DType::Q2_K, DType::Q3_K})
    for (CpuLevel l : {CpuLevel::kAvx512, CpuLevel::kAvx2})
      if (l <= cpu_features().best_level() && kernels_at(l).packed(t))
        for (int64_t m : {1, 8, 16, 64, 512})
          benchmark::RegisterBenchmark(("packed_gemm/" + std::string(dtype_name(t)) +
                                        (l == CpuLevel::kAvx2 ? "/avx2" : "") + "/m" + std::to_string(m))
                                           .c_str(),
                                       BM_PackedGemm, t, l, m)
              ->Unit(benchmark::kMillisecond);
  for (DType t : {DType::Q8_0, DType::Q4_0})
    for (CpuLevel l : {CpuLevel::kAvx2, CpuLevel::kAvx512})
      if (l <= cpu_features().best_level())
        for (int copies : {0, 1, 8})
          benchmark::RegisterBenchmark(("vec_dot_stream/" + std::string(dtype_name(t)) + "/" +
                                        std::string(cpu_level_name(l)) + "/x" + std::to_string(copies))
                                           .c_str(),
                                       BM_VecDotStream, t, l, copies)
              ->Unit(benchmark::kMillisecond);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0,
                  DType::Q5_1, DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::TQ1_0, DType::TQ2_0})
    for (CpuLevel l : {CpuLevel::kScalar, CpuLevel::kAvx2, CpuLevel::kAvx512})
      if (l <= cpu_features().best_level())
        benchmark::RegisterBenchmark(
            ("vec_dot/" + std::string(dtype_name(t)) + "/" + std::string(cpu_level_name(l))).c_str(),
            BM_VecDot, t, l)
            ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace duet
