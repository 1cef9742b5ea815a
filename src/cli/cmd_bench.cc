// duet bench: prefill (pp) and decode (tg) measured separately over several
// repetitions, like llama-bench, with each phase's figure set beside what it
// moves (weight bytes per decode step) and computes (FLOPs per token).
#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "cli/bench_grammar.h"
#include "cli/bench_memory.h"
#include "cli/bench_spread.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/grammar_option.h"
#include "cli/phase_ceilings.h"
#include "cli/progress.h"
#include "cli/roofline_chart.h"
#include "cli/target_model.h"
#include "dist/communicator.h"
#include "engine/engine.h"
#include "kernels/roofline.h"
#include "model/model.h"

namespace duet::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::vector<std::string> models;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int32_t reps = 3;
  std::string threads_list = "0";
  bool json = false;
  std::string svg;  // with --roofline: the roofline picture
  bool no_mmap = false;
  bool roofline = false;
  int32_t probe_mib = 1024;  // the read probe's buffer: far larger than any L3
  std::string kv_type = "f16";
  GrammarOptions grammar;  // given: also time decode under this grammar
};

// Times one phase through the engine, from an empty cache (no prefix
// caching): prefill is n prompt tokens until the first token, decode is n
// tokens generated after a one-token prompt (n single-token steps, the
// first of them that prompt's). Returns the seconds taken.
double time_phase(Engine& engine, const std::vector<int32_t>& ids, bool decode) {
  RequestParams params;
  params.sampling = SamplingParams::greedy();
  params.ignore_eos = true;
  params.max_tokens = decode ? static_cast<int32_t>(ids.size()) : 1;
  const std::vector<int32_t> prompt = decode ? std::vector<int32_t>{ids[0]} : ids;
  double secs = 0;
  auto id = engine.submit(prompt, params, [&](const TokenEvent& ev) {
    if (ev.finished) secs = decode ? ev.timings->token_times.back() : ev.timings->first_token;
  });
  if (!id || !engine.run_until_idle()) return 0;
  return secs;
}

struct PhaseResult {
  std::string test;
  int32_t n = 0;
  bool decode = false;
  std::vector<double> tps;
  std::vector<Roofline> roofs;  // with --roofline: the probes taken just before each repetition
};

// With --roofline every repetition is paired with probes run just before it:
// the bandwidth this shared machine gives moved between ~31 and ~50 GB/s
// from one minute to the next, so a ceiling measured once at the start
// made the same decode speed read as 65 % or 100 %.
std::vector<PhaseResult> bench_model(Engine& engine, const BenchOptions& o) {
  const Model& m = engine.model();
  const int32_t max_tokens = std::max(o.n_prompt, o.n_gen);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, m.config().n_vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(max_tokens));
  for (int32_t& t : ids) t = pick(rng);

  std::vector<PhaseResult> out;
  if (o.n_prompt > 0) out.push_back({"pp" + std::to_string(o.n_prompt), o.n_prompt, false, {}, {}});
  if (o.n_gen > 0) out.push_back({"tg" + std::to_string(o.n_gen), o.n_gen, true, {}, {}});
  ProgressBar bar("bench", static_cast<double>(out.size()) * o.reps, "runs");
  int32_t runs = 0;
  for (PhaseResult& p : out) {
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + p.n);
    // Pages the weights in; prefill warms up on the whole prompt (as
    // llama-bench does), so that the first repetition does not pay for
    // growing the workspace to it: a MoE's routed rows (n x top-k) made
    // ~130 MB of fresh zeroed buffers and the first pp512 ~30 % slow.
    const std::vector<int32_t> warm(prefix.begin(), prefix.begin() + (p.decode ? std::min(p.n, 8) : p.n));
    time_phase(engine, warm, p.decode);
    for (int32_t r = 0; r < o.reps; ++r) {
      if (o.roofline) p.roofs.push_back(measure_roofline(engine.threads(), static_cast<size_t>(o.probe_mib) << 20));
      p.tps.push_back(p.n / time_phase(engine, prefix, p.decode));
      bar.update(++runs);
    }
  }
  return out;
}

// One sequence at a time, every prompt token in one step, nothing reused
// between repetitions.
EngineConfig bench_engine_config(const BenchOptions& o, int32_t n_threads, KvType kv_type) {
  const int32_t max_tokens = std::max({o.n_prompt, o.n_gen, 8});
  EngineConfig c;
  c.n_threads = n_threads;
  c.ctx = max_tokens + 1;
  c.kv_type = kv_type;
  c.scheduler.max_seqs = 1;
  c.scheduler.max_batch_tokens = max_tokens;
  c.scheduler.prefix_caching = false;
  return c;
}

Roofline mean_roofline(const std::vector<Roofline>& roofs) {
  Roofline r;
  for (const Roofline& x : roofs) {
    r.read_gb_s += x.read_gb_s / static_cast<double>(roofs.size());
    r.fma_gflop_s += x.fma_gflop_s / static_cast<double>(roofs.size());
    r.int8_gop_s += x.int8_gop_s / static_cast<double>(roofs.size());
    r.bf16_gflop_s += x.bf16_gflop_s / static_cast<double>(roofs.size());
  }
  return r;
}

int run(const BenchOptions& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1) return fail(err("-p, -n must be >= 0 and -r >= 1"));
  if (o.probe_mib < 1) return fail(err("--probe-mib must be >= 1"));
  if (!o.svg.empty() && !o.roofline) return fail(err("--svg draws the roofline: give --roofline too"));
  auto threads = parse_token_ids(o.threads_list);  // a list of non-negative integers
  if (!threads || threads->empty()) return fail(err("-t expects thread counts like 1,2"));
  const auto compile_start = Clock::now();
  auto grammar = load_grammar(o.grammar);
  if (!grammar) return fail(grammar.error());
  const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - compile_start).count();
  if (*grammar && o.n_gen < 2) return fail(err("timing decode under a grammar needs -n 2 or more"));
  // The other ranks of a tensor-parallel run follow one model's passes and
  // then exit (cli/target_model.h): one load per run.
  const bool parallel = world().size() > 1;
  if (parallel && (threads->size() != 1 || o.models.size() != 1))
    return fail(err("under mpirun, bench takes one model (-m) and one thread count (-t)"));
  nlohmann::json all = nlohmann::json::array();
  std::vector<Chart> charts;  // one roofline per thread count
  std::string memory_lines;   // under the table
  if (!o.json && world().leads()) {
    std::printf("| model | type | threads | test | t/s | achieved | ceiling | %% of ceiling | bound |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
  }
  for (int32_t n_threads : *threads) {
    std::vector<Roofline> roofs;
    std::vector<RooflinePoint> points;
    std::vector<std::string> point_models;  // named on the picture only when they differ
    int32_t pool_threads = n_threads;
    for (const std::string& path : o.models) {
      auto loaded = load_target_model(path, load_mode(o.no_mmap), n_threads);
      if (!loaded) return fail(loaded.error());
      Model& m = **loaded;
      auto kv_type = kv_type_option(o.kv_type, m.kv_shape());
      if (!kv_type) return fail(kv_type.error());
      const DType wtype = main_dtype(m);
      // The type column names the KV type too when it is not the default.
      const std::string type_label =
          std::string(dtype_name(wtype)) + (*kv_type == KvType::F32 ? "" : " kv " + o.kv_type);
      Engine engine(m, bench_engine_config(o, n_threads, *kv_type));
      ThreadPool& pool = engine.threads();
      pool_threads = pool.size();
      const std::vector<PhaseResult> phases = bench_model(engine, o);
      const nlohmann::json memory = memory_report(m, engine, o.no_mmap);
      memory_lines += memory_line(m.config().name, memory);
      std::optional<GrammarCost> grammar_cost_of;
      if (*grammar) {
        auto cost = grammar_cost(engine, o.reps, o.n_gen, *grammar);
        if (!cost) return fail(cost.error());
        grammar_cost_of = *cost;
      }
      const double weight_bytes = static_cast<double>(m.weight_bytes_per_pass());
      const double kv_bytes_per_pos = static_cast<double>(KvCache::bytes_per_token(m.kv_shape(), *kv_type));
      for (const PhaseResult& p : phases) {
        const Spread s = spread(p.tps);
        // Decode streams every weight (and the KV so far) once per token: judge
        // it in bytes/s. Prefill reuses each weight across the batch: judge it in
        // FLOP/s against the FMA peak (float weights) or the int8-dot peak.
        const double bytes_per_tok = weight_bytes + kv_bytes_per_pos * p.n / 2.0;
        // A decode step runs one token through the layers and the head; a
        // prompt of n tokens n through the layers and its last one through the head.
        const double flops_per_tok = m.layer_flops_per_token() + m.head_flops() / (p.decode ? 1 : p.n);
        const double per_tok = p.decode ? bytes_per_tok / 1e9 : flops_per_tok / 1e9;
        const double achieved = s.mean * per_tok;
        const auto ceiling_of = [&](const Roofline& r) {
          return p.decode ? r.read_gb_s : prefill_ceiling(r, wtype);
        };
        // Each repetition against its own probes, then the mean of those ratios.
        std::vector<double> ceilings, pcts;
        for (size_t r = 0; r < p.roofs.size(); ++r) {
          ceilings.push_back(ceiling_of(p.roofs[r]));
          pcts.push_back(100.0 * p.tps[r] * per_tok / ceilings.back());
        }
        const double ceiling = spread(ceilings).mean;
        const Spread pct = spread(pcts);
        const char* unit = p.decode ? "GB/s" : "GFLOP/s";
        nlohmann::json j = {{"model", path}, {"name", m.config().name}, {"type", dtype_name(wtype)},
                            {"threads", pool.size()}, {"test", p.test}, {"n_tokens", p.n},
                            {"tok_s", s.mean}, {"tok_s_stdev", s.stdev}, {"samples_tok_s", p.tps},
                            {"achieved", achieved}, {"unit", unit}, {"kv_type", o.kv_type},
                            {"memory", memory}};
        if (o.roofline) {
          nlohmann::json roofs = nlohmann::json::array();
          for (const Roofline& r : p.roofs)
            roofs.push_back({{"read_gb_s", r.read_gb_s}, {"fma_gflop_s", r.fma_gflop_s}, {"int8_gop_s", r.int8_gop_s},
                             {"bf16_gflop_s", r.bf16_gflop_s}});
          j.update({{"ceiling", ceiling}, {"samples_ceiling", ceilings}, {"percent_of_ceiling", pct.mean},
                    {"percent_of_ceiling_stdev", pct.stdev}, {"bound", p.decode ? "memory bandwidth" : "compute"},
                    {"roofline", roofs}});
        }
        all.push_back(j);
        roofs.insert(roofs.end(), p.roofs.begin(), p.roofs.end());
        // Decode moves the weights (and the KV so far) once per token;
        // prefill moves them once for the batch.
        const double intensity = p.decode ? flops_per_tok / bytes_per_tok : flops_per_tok * p.n / bytes_per_tok;
        points.push_back({p.test + " " + std::string(dtype_name(wtype)), intensity, s.mean * flops_per_tok / 1e9});
        point_models.push_back(m.config().name);
        if (!o.json) {
          std::printf("| %s | %s | %d | %s | %.2f ± %.2f | %.1f %s |", m.config().name.c_str(),
                      type_label.c_str(), pool.size(), p.test.c_str(), s.mean,
                      s.stdev, achieved, unit);
          if (o.roofline)
            std::printf(" %.1f %s | %.0f ± %.0f%% | %s |\n", ceiling, unit, pct.mean, pct.stdev,
                        p.decode ? "memory" : "compute");
          else
            std::printf(" - | - | - |\n");
        }
      }
      if (grammar_cost_of) all.push_back(report_grammar_cost(*grammar_cost_of, m.config().name, compile_ms, o.json));
    }
    if (std::adjacent_find(point_models.begin(), point_models.end(), std::not_equal_to<>()) != point_models.end())
      for (size_t i = 0; i < points.size(); ++i) points[i].name += " " + point_models[i];
    if (!roofs.empty())
      charts.push_back(roofline_chart("roofline, " + std::to_string(pool_threads) + " threads", mean_roofline(roofs),
                                      points));
  }
  if (o.json) std::printf("%s\n", all.dump(2).c_str());
  else if (world().leads()) std::printf("\n%s", memory_lines.c_str());
  if (!o.svg.empty()) {
    if (auto st = write_svg(o.svg, charts); !st) return fail(st.error());
    if (!o.json) std::printf("roofline: %s\n", o.svg.c_str());
  }
  return 0;
}

const bool bench_registered = register_command(
    "bench", "Measure prefill and decode speed (like llama-bench pp/tg)", [](CLI::App& app) {
      auto o = std::make_shared<BenchOptions>();
      app.add_option("-m,--model", o->models, "Model file(s) (GGUF); repeat for several")->required();
      app.add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens for the prefill test (0: skip)")
          ->capture_default_str();
      app.add_option("-n,--n-gen", o->n_gen, "Tokens for the decode test (0: skip)")->capture_default_str();
      app.add_option("-r,--repetitions", o->reps, "Repetitions")->capture_default_str();
      app.add_option("-t,--threads", o->threads_list, "Thread counts, comma separated (0: all cores)")
          ->capture_default_str();
      app.add_flag("--roofline", o->roofline,
                   "Measure this machine's bandwidth and peaks beside every repetition; report each phase against them");
      app.add_option("--probe-mib", o->probe_mib,
                     "MiB the read probe streams (keep it far above the L3 to measure DRAM)")
          ->capture_default_str();
      add_kv_type_option(app, o->kv_type);
      app.add_flag("--json", o->json, "Print JSON instead of a table");
      app.add_option("--svg", o->svg, "With --roofline: draw the ceilings and each phase as an SVG picture");
      add_no_mmap_option(app, o->no_mmap);
      add_grammar_options(app, &o->grammar);
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace duet::cli
