// One decode step's FFN of Qwen3-30B-A3B's shape at Q4_K (packed), the
// mixture of experts against its dense twin of the same bytes, kernel by
// kernel, without the rest of the model (attention, the vocabulary head)
// whose bytes dilute the difference in `duet bench`:
//   MoE: 128 experts of 768, top-8: the router (F32) and the routing,
//        gate and up of the 8 active experts in one grouped matmul,
//        SwiGLU, down in another, the weighted sum;
//   dense: gate and up 6144 x 2048 (one shared matmul), SwiGLU, down.
// Each step picks 8 fresh random experts (and the dense twin cycles through
// copies) so that weights come from DRAM, not the L3. The two alternate
// with the read probe in every repetition, so each figure is judged against
// a ceiling measured seconds before it. Prints numbers; asserts nothing.
//   moe_ffn [threads=2] [steps=100] [reps=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/packed_gemm.h"
#include "kernels/roofline.h"
#include "model/moe.h"

using namespace duet;

namespace {

constexpr int64_t kDim = 2048, kExpertFfn = 768, kExperts = 128, kUsed = 8, kDenseFfn = kUsed * kExpertFfn;
// Copies cycled through, so that weights come from DRAM whatever the L3:
// 4 x 128 experts (1.4 GB), 48 dense FFNs (1 GB).
constexpr int kMoeCopies = 4, kDenseCopies = 48;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A packed matrix [rows][k]: Q4_K of random blocks (f16 scales kept
// finite), or F32 (the router) of small random values.
struct Packed {
  std::unique_ptr<uint8_t[]> bytes;
  TensorView view;
};

Packed random_packed(DType t, int64_t k, int64_t rows, std::mt19937& rng) {
  const size_t row_bytes = t == DType::F32 ? static_cast<size_t>(k) * 4 : static_cast<size_t>(k / 256 * 144);
  std::vector<uint8_t> file(row_bytes * static_cast<size_t>(rows));
  if (t == DType::F32) {
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (size_t i = 0; i < file.size(); i += 4) {
      const float f = u(rng);
      std::memcpy(&file[i], &f, 4);
    }
  } else {
    for (auto& b : file) b = static_cast<uint8_t>(rng() & 0x3b);
  }
  TensorView v;
  v.name = "w";
  v.dtype = t;
  v.n_dims = 2;
  v.ne = {k, rows, 1, 1};
  v.data = file.data();
  v.nbytes = file.size();
  Packed p;
  const size_t n = packed_bytes(v);
  p.bytes.reset(new (std::align_val_t{64}) uint8_t[n]);
  pack_weights(v, p.bytes.get());
  p.view = v;
  p.view.data = p.bytes.get();
  p.view.nbytes = n;
  p.view.packed = true;
  return p;
}

struct Figures {
  double seconds = 0, bytes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 100;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  ThreadPool pool(threads);
  std::mt19937 rng(7);
  std::vector<Packed> gate, up, down;
  for (int64_t e = 0; e < kMoeCopies * kExperts; ++e) {
    gate.push_back(random_packed(DType::Q4_K, kDim, kExpertFfn, rng));
    up.push_back(random_packed(DType::Q4_K, kDim, kExpertFfn, rng));
    down.push_back(random_packed(DType::Q4_K, kExpertFfn, kDim, rng));
  }
  std::vector<Packed> routers;  // F32 [128][2048], one per layer copy
  for (int c = 0; c < kMoeCopies; ++c) routers.push_back(random_packed(DType::F32, kDim, kExperts, rng));
  std::vector<float> logits(kExperts);
  ExpertRoutes routes;
  std::vector<Packed> dgate, dup, ddown;
  for (int c = 0; c < kDenseCopies; ++c) {
    dgate.push_back(random_packed(DType::Q4_K, kDim, kDenseFfn, rng));
    dup.push_back(random_packed(DType::Q4_K, kDim, kDenseFfn, rng));
    ddown.push_back(random_packed(DType::Q4_K, kDenseFfn, kDim, rng));
  }
  std::vector<float> x(kDim), y(kDim), g(kDenseFfn), u(kDenseFfn), ys(kUsed * kDim), weights(kUsed, 1.0f / kUsed);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<uint8_t> scratch(packed_act_row_bytes(kDenseFfn) * kUsed + 4096);
  // The steps' experts: 8 distinct of 128, ascending (as route_tokens gives them).
  std::vector<std::vector<int>> chosen(static_cast<size_t>(steps));
  std::vector<int> all(kExperts);
  std::iota(all.begin(), all.end(), 0);
  for (auto& c : chosen) {
    std::shuffle(all.begin(), all.end(), rng);
    c.assign(all.begin(), all.begin() + kUsed);
    std::sort(c.begin(), c.end());
    for (int& e : c) e += static_cast<int>(&c - chosen.data()) % kMoeCopies * static_cast<int>(kExperts);
  }

  std::vector<MatmulItem> items;
  const auto moe_step = [&](int s, Figures& rt, Figures& gu, Figures& dn) {
    const std::vector<int>& c = chosen[static_cast<size_t>(s)];
    // The router and the routing, whose choice is then set aside for the
    // step's own random experts (random routers route alike step to step).
    const TensorView& router = routers[static_cast<size_t>(s % kMoeCopies)].view;
    auto t0 = std::chrono::steady_clock::now();
    matmul(router, x.data(), 1, logits.data(), scratch.data(), pool);
    route_tokens(logits.data(), 1, kExperts, kUsed, true, routes);
    rt.seconds += seconds_since(t0);
    rt.bytes += static_cast<double>(router.nbytes);
    items.clear();
    for (int64_t j = 0; j < kUsed; ++j) {
      items.push_back({&gate[static_cast<size_t>(c[j])].view, x.data(), 1, &g[j * kExpertFfn]});
      items.push_back({&up[static_cast<size_t>(c[j])].view, x.data(), 1, &u[j * kExpertFfn]});
    }
    t0 = std::chrono::steady_clock::now();
    matmul_grouped(items, scratch.data(), pool);
    swiglu(g.data(), u.data(), g.data(), kDenseFfn);
    gu.seconds += seconds_since(t0);
    items.clear();
    for (int64_t j = 0; j < kUsed; ++j)
      items.push_back({&down[static_cast<size_t>(c[j])].view, &g[j * kExpertFfn], 1, &ys[j * kDim]});
    t0 = std::chrono::steady_clock::now();
    matmul_grouped(items, scratch.data(), pool);
    std::fill(y.begin(), y.end(), 0.0f);
    for (int64_t j = 0; j < kUsed; ++j)
      for (int64_t d = 0; d < kDim; ++d) y[d] += weights[j] * ys[j * kDim + d];
    dn.seconds += seconds_since(t0);
    for (int64_t j = 0; j < kUsed; ++j) {
      gu.bytes += static_cast<double>(gate[static_cast<size_t>(c[j])].view.nbytes + up[static_cast<size_t>(c[j])].view.nbytes);
      dn.bytes += static_cast<double>(down[static_cast<size_t>(c[j])].view.nbytes);
    }
  };
  const auto dense_step = [&](int s, Figures& gu, Figures& dn) {
    const size_t i = static_cast<size_t>(s % kDenseCopies);
    const TensorView* ws[] = {&dgate[i].view, &dup[i].view};
    float* outs[] = {g.data(), u.data()};
    auto t0 = std::chrono::steady_clock::now();
    matmul_shared(ws, x.data(), 1, outs, scratch.data(), pool);
    swiglu(g.data(), u.data(), g.data(), kDenseFfn);
    gu.seconds += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    matmul(ddown[i].view, g.data(), 1, y.data(), scratch.data(), pool);
    dn.seconds += seconds_since(t0);
    gu.bytes += static_cast<double>(dgate[i].view.nbytes + dup[i].view.nbytes);
    dn.bytes += static_cast<double>(ddown[i].view.nbytes);
  };

  std::printf("Qwen3-30B-A3B FFN, Q4_K packed, decode (1 token), %d threads, %d steps x %d repetitions\n",
              threads, steps, reps);
  std::printf("| rep | read probe GB/s | MoE router | MoE gate+up | MoE down | MoE FFN | dense gate+up | dense down | dense FFN "
              "| MoE / dense time |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const auto pct = [](const Figures& f, double probe) { return f.bytes / f.seconds / 1e9 / probe * 100.0; };
  for (int r = 0; r < reps; ++r) {
    Figures mrt, mgu, mdn, dgu, ddn, warm;
    for (int s = 0; s < 3; ++s) {
      moe_step(s, warm, warm, warm);
      dense_step(s, warm, warm);
    }
    const double probe = measure_roofline(pool, size_t{1} << 30, 1).read_gb_s;
    for (int s = 0; s < steps; ++s) {  // interleaved, so both see the same machine
      moe_step(s, mrt, mgu, mdn);
      dense_step(s, dgu, ddn);
    }
    const Figures moe{mrt.seconds + mgu.seconds + mdn.seconds, mrt.bytes + mgu.bytes + mdn.bytes};
    const Figures dense{dgu.seconds + ddn.seconds, dgu.bytes + ddn.bytes};
    std::printf("| %d | %.1f | %.0f%% (%.0f us) | %.0f%% | %.0f%% | %.0f%% (%.0f us) | %.0f%% | %.0f%% | %.0f%% (%.0f us) | %.2f |\n",
                r, probe, pct(mrt, probe), mrt.seconds / steps * 1e6, pct(mgu, probe), pct(mdn, probe), pct(moe, probe), moe.seconds / steps * 1e6, pct(dgu, probe),
                pct(ddn, probe), pct(dense, probe), dense.seconds / steps * 1e6, moe.seconds / dense.seconds);
  }
  std::printf("bytes per step: MoE %.2f MB, dense %.2f MB (percentages: those bytes over the time, of the probe)\n",
              (static_cast<double>(gate[0].view.nbytes + up[0].view.nbytes + down[0].view.nbytes) * kUsed +
               static_cast<double>(routers[0].view.nbytes)) / 1e6,
              static_cast<double>(dgate[0].view.nbytes + dup[0].view.nbytes + ddown[0].view.nbytes) / 1e6);
  return 0;
}
