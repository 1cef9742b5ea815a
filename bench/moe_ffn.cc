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
//   moe_ffn [threads=2] [steps=100] [reps=5] [tokens=1] [moe_copies=4]
// More copies (16: 5.4 GB) read each expert less often, as a deep model's
// decode does (48 layers of 128: each expert every ~16 tokens, ~1 s apart).
// With tokens > 1, a prefill chunk instead: that many tokens, each routed to
// 8 of the 128 experts by random router logits, through the steps DecoderModel::moe_ffn
// takes (gather, gate+up grouped, SwiGLU, down grouped, weighted sum),
// against the dense twin on the same tokens, each judged by the int8 probe.
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
// 4 x 128 experts (1.4 GB) unless told otherwise, 48 dense FFNs (1 GB).
constexpr int kDenseCopies = 48;
int moe_copies = 4;

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

// The experts and the dense twin's copies, cycled through step by step.
struct Weights {
  std::vector<Packed> gate, up, down, routers, dgate, dup, ddown;
};

// One layer's FFN of a prefill chunk of n tokens, the MoE and the dense twin
// alternating step by step (weights from DRAM, copy s % copies).
void prefill(Weights& w, ThreadPool& pool, int n, int steps, int reps, std::mt19937& rng) {
  const auto un = static_cast<size_t>(n), routed = un * kUsed;
  std::vector<float> x(un * kDim), logits(un * kExperts), moe_x(routed * kDim), g(routed * kExpertFfn),
      u(routed * kExpertFfn), moe_y(routed * kDim), out(un * kDim), dg(un * kDenseFfn), du(un * kDenseFfn);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (auto& v : x) v = unit(rng);
  std::vector<uint8_t> scratch(packed_act_row_bytes(kDenseFfn) * routed + 4096);
  // Each step's routing, from random logits (random routers route alike).
  std::vector<ExpertRoutes> routes(static_cast<size_t>(steps));
  for (auto& r : routes) {
    for (auto& v : logits) v = unit(rng);
    route_tokens(logits.data(), n, kExperts, kUsed, true, r);
  }
  std::vector<MatmulItem> items;
  const auto moe_step = [&](int s, Figures& ffn, Figures& gu, Figures& dn) {
    const ExpertRoutes& r = routes[static_cast<size_t>(s)];
    const size_t base = static_cast<size_t>(s % moe_copies * kExperts);
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < routed; ++i)
      std::copy_n(&x[static_cast<size_t>(r.rows[i]) * kDim], kDim, &moe_x[i * kDim]);
    items.clear();
    for (int32_t e = 0; e < kExperts; ++e) {
      const auto at = static_cast<size_t>(r.offset[static_cast<size_t>(e)]);
      if (r.count(e) == 0) continue;
      items.push_back({&w.gate[base + static_cast<size_t>(e)].view, &moe_x[at * kDim], r.count(e), &g[at * kExpertFfn]});
      items.push_back({&w.up[base + static_cast<size_t>(e)].view, &moe_x[at * kDim], r.count(e), &u[at * kExpertFfn]});
    }
    auto t1 = std::chrono::steady_clock::now();
    matmul_grouped(items, scratch.data(), pool);
    gu.seconds += seconds_since(t1);
    swiglu(g.data(), u.data(), g.data(), static_cast<int64_t>(routed * kExpertFfn));
    items.clear();
    for (int32_t e = 0; e < kExperts; ++e) {
      const auto at = static_cast<size_t>(r.offset[static_cast<size_t>(e)]);
      if (r.count(e) > 0)
        items.push_back({&w.down[base + static_cast<size_t>(e)].view, &g[at * kExpertFfn], r.count(e), &moe_y[at * kDim]});
    }
    t1 = std::chrono::steady_clock::now();
    matmul_grouped(items, scratch.data(), pool);
    dn.seconds += seconds_since(t1);
    for (size_t i = 0; i < un; ++i) {
      float* o = &out[i * kDim];
      std::fill_n(o, kDim, 0.0f);
      for (size_t j = 0; j < kUsed; ++j) {
        const auto entry = static_cast<size_t>(r.entries[i * kUsed + j]);
        for (int64_t d = 0; d < kDim; ++d) o[d] += r.weights[entry] * moe_y[entry * kDim + static_cast<size_t>(d)];
      }
    }
    ffn.seconds += seconds_since(t0);
  };
  const auto dense_step = [&](int s, Figures& ffn) {
    const size_t i = static_cast<size_t>(s % kDenseCopies);
    const TensorView* ws[] = {&w.dgate[i].view, &w.dup[i].view};
    float* outs[] = {dg.data(), du.data()};
    const auto t0 = std::chrono::steady_clock::now();
    matmul_shared(ws, x.data(), n, outs, scratch.data(), pool);
    swiglu(dg.data(), du.data(), dg.data(), static_cast<int64_t>(un * kDenseFfn));
    matmul(w.ddown[i].view, dg.data(), n, out.data(), scratch.data(), pool);
    ffn.seconds += seconds_since(t0);
  };
  // Active operations per token: 3 matrices of 8 x 768 x 2048, 2 per product.
  const double ops = 2.0 * 3 * kUsed * kExpertFfn * kDim * n;
  std::printf("Qwen3-30B-A3B FFN, Q4_K packed, prefill chunk of %d tokens, %d threads, %d steps x %d repetitions\n", n,
              pool.size(), steps, reps);
  std::printf("| rep | int8 probe GOP/s | MoE FFN ms | of which gate+up, down | MoE %% of probe | dense FFN ms | dense %% | MoE / dense time |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int rep = 0; rep < reps; ++rep) {
    Figures moe, gu, dn, dense, warm;
    moe_step(0, warm, warm, warm);
    dense_step(0, warm);
    const double probe = measure_roofline(pool, size_t{1} << 24, 3).int8_gop_s;
    for (int s = 0; s < steps; ++s) {
      moe_step(s, moe, gu, dn);
      dense_step(s, dense);
    }
    const auto pct = [&](const Figures& f) { return ops * steps / f.seconds / 1e9 / probe * 100.0; };
    std::printf("| %d | %.0f | %.2f | %.2f, %.2f | %.1f%% | %.2f | %.1f%% | %.3f |\n", rep, probe, moe.seconds / steps * 1e3,
                gu.seconds / steps * 1e3, dn.seconds / steps * 1e3, pct(moe), dense.seconds / steps * 1e3, pct(dense),
                moe.seconds / dense.seconds);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 100;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const int tokens = argc > 4 ? std::atoi(argv[4]) : 1;
  moe_copies = argc > 5 ? std::max(1, std::atoi(argv[5])) : 4;
  ThreadPool pool(threads);
  std::mt19937 rng(7);
  Weights w;
  auto &gate = w.gate, &up = w.up, &down = w.down, &routers = w.routers, &dgate = w.dgate, &dup = w.dup,
       &ddown = w.ddown;
  for (int64_t e = 0; e < moe_copies * kExperts; ++e) {
    gate.push_back(random_packed(DType::Q4_K, kDim, kExpertFfn, rng));
    up.push_back(random_packed(DType::Q4_K, kDim, kExpertFfn, rng));
    down.push_back(random_packed(DType::Q4_K, kExpertFfn, kDim, rng));
  }
  // F32 [128][2048], one per layer copy
  for (int c = 0; c < moe_copies; ++c) routers.push_back(random_packed(DType::F32, kDim, kExperts, rng));
  std::vector<float> logits(kExperts);
  ExpertRoutes routes;
  for (int c = 0; c < kDenseCopies; ++c) {
    dgate.push_back(random_packed(DType::Q4_K, kDim, kDenseFfn, rng));
    dup.push_back(random_packed(DType::Q4_K, kDim, kDenseFfn, rng));
    ddown.push_back(random_packed(DType::Q4_K, kDenseFfn, kDim, rng));
  }
  if (tokens > 1) {
    prefill(w, pool, tokens, steps, reps, rng);
    return 0;
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
    for (int& e : c) e += static_cast<int>(&c - chosen.data()) % moe_copies * static_cast<int>(kExperts);
  }

  std::vector<MatmulItem> items;
  const auto moe_step = [&](int s, Figures& rt, Figures& gu, Figures& dn) {
    const std::vector<int>& c = chosen[static_cast<size_t>(s)];
    // The router and the routing, whose choice is then set aside for the
    // step's own random experts (random routers route alike step to step).
    const TensorView& router = routers[static_cast<size_t>(s % moe_copies)].view;
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
