// Micro-benchmarks of matmul: decode's matvec judged in bytes/s of weights
// read (memory-bound), prefill's matmul in FLOP/s (compute-bound). The CPU
// level is the active one (DUET_CPU=scalar|avx2|avx512 to compare).
//
//   duet_microbench --benchmark_filter=Matvec
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/ops.h"
#include "kernels/packed_gemm.h"
#include "kernels/registry.h"

namespace duet {
namespace {

// A weight matrix [n_out][k] of type t, repeated in `copies` distinct buffers
// so a matvec loop can cycle through more bytes than the last-level cache.
struct Weights {
  std::vector<std::vector<uint8_t>> copies;
  std::vector<TensorView> views;

  Weights(DType t, int64_t k, int64_t n_out, int n_copies) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const size_t elem = t == DType::F32 ? 4 : 2;
    const size_t n = static_cast<size_t>(k * n_out);
    for (int c = 0; c < n_copies; ++c) {
      std::vector<uint8_t> bytes(n * elem);
      for (size_t i = 0; i < n; ++i) {
        const float f = dist(rng);
        if (t == DType::F32) {
          std::memcpy(&bytes[i * 4], &f, 4);
        } else {
          const uint16_t h = t == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
          std::memcpy(&bytes[i * 2], &h, 2);
        }
      }
      copies.push_back(std::move(bytes));
    }
    for (const auto& b : copies) {
      TensorView v;
      v.dtype = t;
      v.n_dims = 2;
      v.ne = {k, n_out, 1, 1};
      v.data = b.data();
      v.nbytes = b.size();
      views.push_back(v);
    }
  }
};

std::vector<float> random_activations(size_t n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// args: threads. A 2048 x 5632 projection (TinyLlama's FFN up/gate).
void BM_Matvec(benchmark::State& state, DType t) {
  const int64_t k = 2048, n_out = 5632;
  const Weights w(t, k, n_out, 4);  // 4 copies: ~90-180 MB, past any L3
  ThreadPool pool(static_cast<int>(state.range(0)));
  const auto x = random_activations(k);
  std::vector<float> y(n_out);
  std::vector<uint8_t> scratch(activation_scratch_bytes(w.views[0], 1));
  size_t i = 0;
  for (auto _ : state) {
    matmul(w.views[i++ % w.views.size()], x.data(), 1, y.data(), scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["bytes/s"] = benchmark::Counter(
      static_cast<double>(w.views[0].nbytes) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// args: m (tokens), threads. TinyLlama's FFN gate/up (2048 x 5632) or, with
// down, its down projection (5632 x 2048): the same FLOPs, rows 5.5x as long.
void BM_Matmul(benchmark::State& state, DType t, bool down = false) {
  const int64_t k = down ? 5632 : 2048, n_out = down ? 2048 : 5632, m = state.range(0);
  const Weights w(t, k, n_out, 1);
  ThreadPool pool(static_cast<int>(state.range(1)));
  const auto x = random_activations(static_cast<size_t>(k * m));
  std::vector<float> y(static_cast<size_t>(m * n_out));
  std::vector<uint8_t> scratch(activation_scratch_bytes(w.views[0], m));
  for (auto _ : state) {
    matmul(w.views[0], x.data(), m, y.data(), scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(k * n_out * m) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// BM_Matmul on the weights packed (kernels/packed_gemm.h) as a model loads
// them: BF16 prefill's vdpbf16ps path (DUET_BF16_DOT=0 for the fma one).
void BM_PackedMatmul(benchmark::State& state, DType t, bool down) {
  const int64_t k = down ? 5632 : 2048, n_out = down ? 2048 : 5632, m = state.range(0);
  const Weights w(t, k, n_out, 1);
  if (!packable(w.views[0])) return state.SkipWithError("no packed kernels for this type here");
  std::vector<uint8_t> packed(packed_bytes(w.views[0]));
  pack_weights(w.views[0], packed.data());
  TensorView pv = w.views[0];
  pv.data = packed.data();
  pv.packed = true;
  ThreadPool pool(static_cast<int>(state.range(1)));
  const auto x = random_activations(static_cast<size_t>(k * m));
  std::vector<float> y(static_cast<size_t>(m * n_out));
  std::vector<uint8_t> scratch(activation_scratch_bytes(pv, m));
  for (auto _ : state) {
    matmul(pv, x.data(), m, y.data(), scratch.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(k * n_out * m) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The fp32 FMA and (where the CPU has it) BF16 dot probes of one thread,
// the ceilings BM_PackedMatmul's FLOP/s compare against.
void BM_ProbeFma(benchmark::State& state) {
  float sink = 0;
  double flops = 0;
  for (auto _ : state) flops += kernels().probes()->fma_flops(1'000'000, &sink);
  benchmark::DoNotOptimize(sink);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
void BM_ProbeBf16Dot(benchmark::State& state) {
  const auto probe = kernels().probes()->bf16_flops;
  if (!probe || !cpu_features().avx512bf16) return state.SkipWithError("no AVX512_BF16 here");
  float sink = 0;
  double flops = 0;
  for (auto _ : state) flops += probe(1'000'000, &sink);
  benchmark::DoNotOptimize(sink);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ProbeFma);
BENCHMARK(BM_ProbeBf16Dot);

BENCHMARK_CAPTURE(BM_Matvec, f32, DType::F32)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, f16, DType::F16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matvec, bf16, DType::BF16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, f32, DType::F32)
    ->ArgsProduct({{64, 512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, f16, DType::F16)
    ->ArgsProduct({{64, 512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, f16_down, DType::F16, true)
    ->ArgsProduct({{64, 512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, bf16, DType::BF16)
    ->ArgsProduct({{64, 512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PackedMatmul, bf16, DType::BF16, false)
    ->ArgsProduct({{16, 64, 512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PackedMatmul, bf16_down, DType::BF16, true)
    ->ArgsProduct({{64, 512}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace duet
