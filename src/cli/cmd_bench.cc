// duet bench: prefill (pp) and decode (tg) measured separately over several
// repetitions, like llama-bench, with each phase's figure set beside what it
// moves (weight bytes per decode step) and computes (FLOPs per token).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/command.h"
#include "cli/common.h"
#include "model/model.h"

namespace duet::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int32_t reps = 3;
  int32_t threads = 0;
  bool json = false;
};

struct Spread {
  double mean = 0, stdev = 0;
};

Spread spread(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stdev += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(s.stdev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

// Runs prefill of n tokens as one batch, or n single-token decode steps,
// from an empty cache; returns the seconds taken.
double time_phase(Model& m, ThreadPool& pool, KvCache& cache, const std::vector<int32_t>& ids,
                  bool decode, std::vector<float>& logits) {
  BlockTable table;
  table.reserve(cache.pool(), static_cast<int32_t>(ids.size()));
  Batch batch;
  const auto t0 = Clock::now();
  if (!decode) {
    const int32_t s = batch.add_sequence(&table);
    for (size_t i = 0; i < ids.size(); ++i)
      batch.add(ids[i], static_cast<int32_t>(i), s, i + 1 == ids.size());
    (void)m.forward(batch, cache, pool, logits.data());
  } else {
    for (size_t i = 0; i < ids.size(); ++i) {
      batch.clear();
      batch.add(ids[i], static_cast<int32_t>(i), batch.add_sequence(&table), true);
      (void)m.forward(batch, cache, pool, logits.data());
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  table.release_all(cache.pool());
  return secs;
}

int run(const BenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1) return fail(err("-p, -n must be >= 0 and -r >= 1"));
  auto loaded = Model::load(o.model);
  if (!loaded) return fail(loaded.error());
  Model& m = **loaded;
  ThreadPool pool(o.threads);
  const int32_t max_tokens = std::max(o.n_prompt, o.n_gen);
  KvCache cache(m.kv_shape(), blocks_for_tokens(std::max(1, max_tokens)));
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, m.config().n_vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(max_tokens));
  for (int32_t& t : ids) t = pick(rng);

  struct Phase {
    const char* name;
    int32_t n;
    bool decode;
    std::vector<double> tps;
  };
  std::vector<Phase> phases;
  if (o.n_prompt > 0) phases.push_back({"pp", o.n_prompt, false, {}});
  if (o.n_gen > 0) phases.push_back({"tg", o.n_gen, true, {}});
  for (Phase& p : phases) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + p.n);
    time_phase(m, pool, cache, std::vector<int32_t>(prefix.begin(), prefix.begin() + std::min(p.n, 8)),
               p.decode, logits);  // warm-up: page in weights
    for (int32_t r = 0; r < o.reps; ++r) p.tps.push_back(p.n / time_phase(m, pool, cache, prefix, p.decode, logits));
  }

  const double weight_gb = static_cast<double>(m.weight_bytes_per_pass()) / 1e9;
  const double gflop_per_tok = m.matmul_flops_per_token() / 1e9;
  nlohmann::json results = nlohmann::json::array();
  if (!o.json)
    std::printf("| model | threads | test | t/s | GB/s (weights) | GFLOP/s |\n|---|---|---|---|---|---|\n");
  for (const Phase& p : phases) {
    const Spread s = spread(p.tps);
    // Decode streams every weight once per token; prefill reuses each weight
    // across the whole batch, so only its FLOP rate is meaningful.
    const double gbs = p.decode ? s.mean * weight_gb : 0.0;
    const double gflops = s.mean * gflop_per_tok;
    const std::string test = std::string(p.name) + std::to_string(p.n);
    results.push_back({{"test", test}, {"n_tokens", p.n}, {"tok_s", s.mean}, {"tok_s_stdev", s.stdev},
                       {"samples_tok_s", p.tps}, {"weight_gb_s", gbs}, {"gflop_s", gflops}});
    if (!o.json)
      std::printf("| %s | %d | %s | %.2f ± %.2f | %s | %.1f |\n", m.config().name.c_str(), pool.size(),
                  test.c_str(), s.mean, s.stdev, p.decode ? std::to_string(gbs).substr(0, 6).c_str() : "-",
                  gflops);
  }
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"name", m.config().name}, {"threads", pool.size()},
                        {"weight_bytes_per_token", m.weight_bytes_per_pass()},
                        {"flops_per_token", m.matmul_flops_per_token()}, {"results", results}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

const bool registered = register_command(
    "bench", "Measure prefill and decode speed (like llama-bench pp/tg)", [](CLI::App& app) {
      auto o = std::make_shared<BenchOptions>();
      app.add_option("-m,--model", o->model, "Model file (GGUF)")->required();
      app.add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens for the prefill test (0: skip)")
          ->capture_default_str();
      app.add_option("-n,--n-gen", o->n_gen, "Tokens for the decode test (0: skip)")->capture_default_str();
      app.add_option("-r,--repetitions", o->reps, "Repetitions")->capture_default_str();
      app.add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
      app.add_flag("--json", o->json, "Print JSON instead of a table");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace duet::cli
