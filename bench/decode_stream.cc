// The decode step's matrix products alone, streamed from DRAM, against the
// read probe measured in the same repetition. TinyLlama-1.1B's layer shapes
// (q 2048x2048, k and v 256 rows, o, gate and up 5632 rows, down 2048 rows
// of 5632), packed, in as many layer copies as make ~200 MB or more (far past
// any L3), in one huge-page buffer as the model loader puts them. Three
// figures per type, in GB/s of packed weights and as a share of the probe:
//   path:   the layers as the decoder runs them (matmul_shared for q/k/v and
//           gate/up, matmul for o and down): activation quantization, the
//           split of rows between threads, one parallel region per product;
//   kernel: every thread runs the packed kernel over its own contiguous half
//           of each matrix, one parallel region for the whole sweep (no
//           hand-offs, a static split): what the kernel streams;
//   probe:  the read probe of `duet bench --roofline` (huge pages, with and
//           without prefetch, the faster), over 1 GiB.
// What is lost between the probe and kernel is the kernel's; between kernel
// and path, the split and the hand-offs. Prints numbers; asserts nothing.
//   [DUET_CPU_TIME=1] decode_stream [threads=2] [reps=5] [types=q4_0,q8_0,q4_k,f16]
// (types also: iq4_nl, q5_0, q5_1, iq4_xs, q2_k, q3_k)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/huge_buffer.h"
#include "core/quant_blocks.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/packed_gemm.h"
#include "kernels/quant.h"
#include "kernels/registry.h"

using namespace duet;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kDim = 2048, kKvDim = 256, kFfn = 5632;
constexpr size_t kMinBytes = size_t{200} << 20;
constexpr size_t kAlign = 4096;

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Byte offsets of a block's f16 fields (scales and mins).
std::vector<size_t> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_K:
    case DType::Q5_1: return {0, 2};
    case DType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K: return {offsetof(BlockQ3_K, d)};
    default: return {0};
  }
}

// One matrix in file layout: random quants, every f16 scale 0.01 (random
// bits would include NaNs); float types small random values.
std::vector<uint8_t> random_file(DType t, int64_t k, int64_t rows, std::mt19937& rng) {
  std::vector<uint8_t> m(*row_bytes(t, k) * static_cast<size_t>(rows));
  if (t == DType::F16) {
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (size_t i = 0; i < m.size(); i += 2) {
      const uint16_t h = f32_to_f16(u(rng));
      std::memcpy(&m[i], &h, 2);
    }
    return m;
  }
  for (auto& b : m) b = static_cast<uint8_t>(rng());
  const uint16_t d = f32_to_f16(0.01f);
  const size_t bb = traits(t).block_bytes;
  for (size_t off = 0; off < m.size(); off += bb)
    for (size_t f : f16_fields(t)) std::memcpy(&m[off + f], &d, 2);
  return m;
}

struct Layer {
  TensorView q, k, v, o, gate, up, down;
};

struct Model {
  HugeBuffer buffer;
  std::vector<Layer> layers;
  size_t bytes = 0;  // packed bytes of all the layers
};

Model build(DType t) {
  std::mt19937 rng(3);
  struct Shape {
    TensorView Layer::*member;
    int64_t k, rows;
  };
  const Shape shapes[] = {{&Layer::q, kDim, kDim},    {&Layer::k, kDim, kKvDim},   {&Layer::v, kDim, kKvDim},
                          {&Layer::o, kDim, kDim},    {&Layer::gate, kDim, kFfn},  {&Layer::up, kDim, kFfn},
                          {&Layer::down, kFfn, kDim}};
  std::vector<TensorView> files;
  std::vector<std::vector<uint8_t>> data;
  size_t layer_bytes = 0;
  for (const Shape& s : shapes) {
    data.push_back(random_file(t, s.k, s.rows, rng));
    TensorView v;
    v.name = "w";
    v.dtype = t;
    v.n_dims = 2;
    v.ne = {s.k, s.rows, 1, 1};
    v.data = data.back().data();
    v.nbytes = data.back().size();
    files.push_back(v);
    layer_bytes += (packed_bytes(v) + kAlign - 1) / kAlign * kAlign;
  }
  Model m;
  const size_t n_layers = std::max<size_t>(2, (kMinBytes + layer_bytes - 1) / layer_bytes);
  Result<HugeBuffer> buffer = HugeBuffer::allocate(layer_bytes * n_layers, "weights");
  m.buffer = std::move(*buffer);
  uint8_t* at = m.buffer.data();
  for (size_t l = 0; l < n_layers; ++l) {
    Layer layer;
    for (size_t i = 0; i < std::size(shapes); ++i) {
      TensorView v = files[i];
      const size_t n = packed_bytes(v);
      if (l == 0)
        pack_weights(v, at);
      else
        std::memcpy(at, (m.layers[0].*shapes[i].member).data, n);  // the speed does not depend on the values
      v.data = at;
      v.nbytes = n;
      v.packed = true;
      layer.*shapes[i].member = v;
      m.bytes += n;
      at += (n + kAlign - 1) / kAlign * kAlign;
    }
    m.layers.push_back(layer);
  }
  return m;
}

struct Probe {
  HugeBuffer buffer;
  size_t n = 0;  // floats
};

Probe make_probe(ThreadPool& pool) {
  Probe p;
  p.n = (size_t{1} << 30) / sizeof(float);
  Result<HugeBuffer> buffer = HugeBuffer::allocate(p.n * sizeof(float), "probe");
  p.buffer = std::move(*buffer);
  auto* f = reinterpret_cast<float*>(p.buffer.data());
  pool.run([&](int i, int nt) { std::fill(f + p.n * i / nt / 64 * 64, f + p.n * (i + 1) / nt / 64 * 64, 1.0f); });
  return p;
}

// GB/s of the fastest read loop, as duet bench's probe.
double read_probe(const Probe& p, ThreadPool& pool) {
  const ProbeKernels& k = *kernels().probes();
  const auto* f = reinterpret_cast<const float*>(p.buffer.data());
  std::atomic<float> sink{0};
  double best = 1e30;
  for (ReadLoop sum : k.reads) {
    const auto t0 = Clock::now();
    pool.run([&](int i, int nt) {
      const size_t b = p.n * i / nt / 64 * 64, e = p.n * (i + 1) / nt / 64 * 64;
      sink.fetch_add(sum(f + b, e - b));
    });
    best = std::min(best, seconds_since(t0));
  }
  return static_cast<double>(p.n * sizeof(float)) / best / 1e9;
}

struct Acts {
  std::vector<float> x, h, q, k, v, o, gate, up, down;
  std::vector<uint8_t> scratch, xq, hq;
};

void path_sweep(const Model& m, Acts& a, ThreadPool& pool) {
  for (const Layer& l : m.layers) {
    const TensorView* qkv[] = {&l.q, &l.k, &l.v};
    float* qkv_out[] = {a.q.data(), a.k.data(), a.v.data()};
    matmul_shared(qkv, a.x.data(), 1, qkv_out, a.scratch.data(), pool);
    matmul(l.o, a.x.data(), 1, a.o.data(), a.scratch.data(), pool);
    const TensorView* gu[] = {&l.gate, &l.up};
    float* gu_out[] = {a.gate.data(), a.up.data()};
    matmul_shared(gu, a.x.data(), 1, gu_out, a.scratch.data(), pool);
    matmul(l.down, a.h.data(), 1, a.down.data(), a.scratch.data(), pool);
  }
}

// Rows [r0, r1) of w (16-row groups), on this thread.
void kernel_rows(const PackedKernels& pk, const TensorView& w, int64_t r0, int64_t r1, const uint8_t* x,
                 size_t x_bytes, float* y) {
  const size_t group_bytes = packed_bytes(w) / static_cast<size_t>(w.ne[1] / kPackRows);
  pk.gemm(w.ne[0], static_cast<const uint8_t*>(w.data) + r0 / kPackRows * group_bytes, (r1 - r0) / kPackRows, x,
          x_bytes, 1, y + r0, w.ne[1]);
}

void kernel_sweep(const Model& m, Acts& a, const PackedKernels& pk, ThreadPool& pool) {
  const bool floats = pk.offset == kFloatActs;
  const uint8_t* xs = floats ? reinterpret_cast<const uint8_t*>(a.x.data()) : a.xq.data();
  const uint8_t* hs = floats ? reinterpret_cast<const uint8_t*>(a.h.data()) : a.hq.data();
  const size_t xb = floats ? kDim * sizeof(float) : sizeof(PackedActBlock);
  const size_t hb = floats ? kFfn * sizeof(float) : sizeof(PackedActBlock);
  pool.run([&](int i, int nt) {
    const auto half = [&](const TensorView& w, const uint8_t* x, size_t x_bytes, float* y) {
      const int64_t groups = w.ne[1] / kPackRows;
      kernel_rows(pk, w, groups * i / nt * kPackRows, groups * (i + 1) / nt * kPackRows, x, x_bytes, y);
    };
    for (const Layer& l : m.layers) {
      half(l.q, xs, xb, a.q.data());
      half(l.k, xs, xb, a.k.data());
      half(l.v, xs, xb, a.v.data());
      half(l.o, xs, xb, a.o.data());
      half(l.gate, xs, xb, a.gate.data());
      half(l.up, xs, xb, a.up.data());
      half(l.down, hs, hb, a.down.data());
    }
  });
}

DType parse(const std::string& s) {
  if (s == "q4_0") return DType::Q4_0;
  if (s == "q8_0") return DType::Q8_0;
  if (s == "q4_k") return DType::Q4_K;
  if (s == "f16") return DType::F16;
  if (s == "iq4_nl") return DType::IQ4_NL;
  if (s == "q5_0") return DType::Q5_0;
  if (s == "q5_1") return DType::Q5_1;
  if (s == "iq4_xs") return DType::IQ4_XS;
  if (s == "q2_k") return DType::Q2_K;
  if (s == "q3_k") return DType::Q3_K;
  std::fprintf(stderr, "decode_stream: unknown type %s\n", s.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  // DUET_CPU_TIME=1: rates from the process's CPU time over the threads
  // (on a machine others load, time the threads ran, not wall time).
  const bool cpu_time = std::getenv("DUET_CPU_TIME") != nullptr;
  std::vector<DType> types;
  std::stringstream list(argc > 3 ? argv[3] : "q4_0,q8_0,q4_k,f16");
  for (std::string s; std::getline(list, s, ',');) types.push_back(parse(s));
  ThreadPool pool(threads);
  const Probe probe = make_probe(pool);
  std::mt19937 rng(5);
  Acts a;
  for (auto* v : {&a.x, &a.q, &a.o}) v->resize(kDim);
  for (auto* v : {&a.h, &a.gate, &a.up}) v->resize(kFfn);
  a.k.resize(kKvDim);
  a.v.resize(kKvDim);
  a.down.resize(kDim);
  for (float& f : a.x) f = std::normal_distribution<float>()(rng);
  for (float& f : a.h) f = std::normal_distribution<float>()(rng);
  a.scratch.resize(packed_act_row_bytes(kFfn) + 4096);
  a.xq.resize(packed_act_row_bytes(kDim));
  a.hq.resize(packed_act_row_bytes(kFfn));
  std::printf("decode matmuls of TinyLlama-1.1B's layers, packed, 1 token, %d threads, %d repetitions\n", threads, reps);
  std::printf("| type | MB per sweep | rep | probe GB/s | kernel GB/s | kernel %% | path GB/s | path %% |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (DType t : types) {
    const PackedKernels* pk = kernels().packed(t);
    if (!pk) {
      std::printf("| %s | no packed kernels at this level |\n", std::string(dtype_name(t)).c_str());
      continue;
    }
    const Model m = build(t);
    if (pk->offset != kFloatActs) {
      pk->quantize(a.x.data(), a.xq.data(), kDim, pk->offset, sizeof(PackedActBlock));
      pk->quantize(a.h.data(), a.hq.data(), kFfn, pk->offset, sizeof(PackedActBlock));
    }
    // Sweeps per figure: ~0.3 s of streaming at 50 GB/s.
    const int sweeps = std::max(3, static_cast<int>(15e9 / static_cast<double>(m.bytes)));
    const auto rate = [&](auto&& sweep) {
      sweep();  // warm: page tables, the pool
      const auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      for (int s = 0; s < sweeps; ++s) sweep();
      const double secs = cpu_time ? (cpu_seconds() - c0) / threads : seconds_since(t0);
      return static_cast<double>(m.bytes) * sweeps / secs / 1e9;
    };
    double sum_k = 0, sum_p = 0;
    for (int r = 0; r < reps; ++r) {
      const double pr = read_probe(probe, pool);
      const double kr = rate([&] { kernel_sweep(m, a, *pk, pool); });
      const double path = rate([&] { path_sweep(m, a, pool); });
      sum_k += kr / pr;
      sum_p += path / pr;
      std::printf("| %s | %.0f | %d | %.1f | %.1f | %.0f %% | %.1f | %.0f %% |\n", std::string(dtype_name(t)).c_str(),
                  static_cast<double>(m.bytes) / 1e6, r, pr, kr, 100 * kr / pr, path, 100 * path / pr);
      std::fflush(stdout);
    }
    std::printf("| %s | | mean | | | %.0f %% | | %.0f %% |\n", std::string(dtype_name(t)).c_str(), 100 * sum_k / reps,
                100 * sum_p / reps);
  }
  return 0;
}
