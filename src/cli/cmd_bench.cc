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

#include "cli/command.h"
#include "cli/common.h"
#include "cli/grammar_option.h"
#include "cli/phase_ceilings.h"
#include "cli/progress.h"
#include "cli/roofline_chart.h"
#include "cli/target_model.h"
#include "dist/communicator.h"
#include "core/memory_info.h"
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

// Decode under a grammar against decode without it. Each repetition runs
// the two back to back with the same sampler and seed (temperature 0.8,
// top-k 40: greedy on random weights repeats one token inside the first
// string, which would time one cached mask), so the machine's load drifts
// hit both alike. ITL is compared over the tokens both runs made: the
// grammar may end its run early, and later tokens attend to more KV.
struct GrammarCost {
  std::vector<double> free_ms, constrained_ms;  // mean ITL per repetition
  std::vector<double> grammar_ms;               // per token, timed inside the engine
  std::vector<int32_t> n_tokens;                // tokens compared per repetition
};

// When each generated token was sampled, in seconds from submission.
RequestTimings decode_timings(Engine& engine, int32_t first, int32_t n, std::shared_ptr<const Grammar> grammar,
                              uint64_t seed) {
  RequestParams params;
  params.sampling.seed = seed;
  params.ignore_eos = true;
  params.max_tokens = n;
  params.grammar = std::move(grammar);
  RequestTimings timings;
  auto id = engine.submit({first}, params, [&](const TokenEvent& ev) {
    if (ev.finished) timings = *ev.timings;
  });
  if (!id || !engine.run_until_idle()) return {};
  return timings;
}

double mean_itl_ms(const std::vector<double>& times, size_t n) {
  return 1000.0 * (times[n - 1] - times[0]) / static_cast<double>(n - 1);
}

Result<GrammarCost> grammar_cost(Engine& engine, const BenchOptions& o, std::shared_ptr<const Grammar> grammar) {
  const int32_t first = engine.model().tokenizer().bos_id() >= 0 ? engine.model().tokenizer().bos_id() : 0;
  decode_timings(engine, first, 8, grammar, 1);  // builds the vocabulary's trie, pages the weights in
  GrammarCost c;
  for (int32_t r = 0; r < o.reps; ++r) {
    const auto seed = static_cast<uint64_t>(r + 1);
    const std::vector<double> free = decode_timings(engine, first, o.n_gen, nullptr, seed).token_times;
    const RequestTimings constrained = decode_timings(engine, first, o.n_gen, grammar, seed);
    const size_t n = std::min(free.size(), constrained.token_times.size());
    if (n < 2)
      return err("the grammar let the model write ", constrained.token_times.size(), " tokens: too few to time");
    c.free_ms.push_back(mean_itl_ms(free, n));
    c.constrained_ms.push_back(mean_itl_ms(constrained.token_times, n));
    c.grammar_ms.push_back(1000.0 * constrained.grammar_seconds / static_cast<double>(constrained.token_times.size()));
    c.n_tokens.push_back(static_cast<int32_t>(n));
  }
  return c;
}

nlohmann::json report_grammar_cost(const GrammarCost& c, const std::string& model, double compile_ms, bool json) {
  const Spread f = spread(c.free_ms), g = spread(c.constrained_ms);
  std::vector<double> ratios;
  for (size_t r = 0; r < c.free_ms.size(); ++r) ratios.push_back(c.constrained_ms[r] / c.free_ms[r]);
  const Spread ratio = spread(ratios);
  // A burst of other work on a shared machine lands in one run of a pair:
  // the median of the pairs' ratios is steadier than their mean.
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  // The engine's own account of the grammar's time: far less noisy than a
  // difference of two ITLs on a shared machine.
  const Spread gm = spread(c.grammar_ms);
  const double share = gm.mean / f.mean;
  if (!json)
    std::printf("grammar %s: ITL %.2f ± %.2f ms free, %.2f ± %.2f ms constrained, ratio %.3f ± %.3f (median %.3f); "
                "grammar work %.3f ± %.3f ms/token = %.2f%% of free ITL (%d tokens, compiled in %.2f ms)\n",
                model.c_str(), f.mean, f.stdev, g.mean, g.stdev, ratio.mean, ratio.stdev, median, gm.mean, gm.stdev,
                100.0 * share, c.n_tokens.front(), compile_ms);
  return {{"model", model}, {"test", "grammar"}, {"itl_ms", f.mean}, {"itl_constrained_ms", g.mean},
          {"ratio", ratio.mean}, {"ratio_stdev", ratio.stdev}, {"ratio_median", median},
          {"samples_ratio", ratios},
          {"grammar_ms_per_token", gm.mean}, {"samples_grammar_ms", c.grammar_ms}, {"grammar_share_of_itl", share},
          {"n_tokens", c.n_tokens}, {"compile_ms", compile_ms}};
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

// Resident memory after the runs (every weight touched) beside what it
// should be: the weights once (mapped in place, or packed in place of their
// file bytes) plus the KV cache, with nothing copied twice.
nlohmann::json memory_report(const Model& m, const Engine& engine, bool no_mmap) {
  size_t weights = 0;
  for (const TensorView& t : m.file().tensors()) weights += t.nbytes;
  const Model::WeightCopies copies = m.weight_copies();
  // A --no-mmap copy keeps the bytes packing replaced; a mapping gives them back.
  const size_t replaced = no_mmap ? 0 : copies.file_bytes_replaced;
  const size_t kv = engine.cache().bytes_total();
  const double expected = static_cast<double>(weights - replaced + copies.bytes + kv);
  const ResidentMemory rss = resident_memory();
  return {{"weight_bytes", weights},      {"packed_bytes", copies.bytes},
          {"packed_replaced_bytes", replaced}, {"kv_bytes", kv},
          {"expected_bytes", expected},   {"rss_bytes", rss.total},
          {"rss_anon_bytes", rss.anon},   {"rss_file_bytes", rss.file},
          {"rss_over_expected", expected > 0 ? static_cast<double>(rss.total) / expected : 0.0}};
}

std::string memory_line(const std::string& name, const nlohmann::json& j) {
  const auto mib = [&](const char* key) { return j[key].get<double>() / (1 << 20); };
  char line[512];
  std::snprintf(line, sizeof line,
                "memory %s: resident %.0f MiB (file-backed %.0f, anonymous %.0f) = %.2fx the %.0f MiB expected "
                "(weights %.0f, of which %.0f replaced by %.0f packed; KV %.0f)\n",
                name.c_str(), mib("rss_bytes"), mib("rss_file_bytes"), mib("rss_anon_bytes"),
                j["rss_over_expected"].get<double>(), mib("expected_bytes"), mib("weight_bytes"),
                mib("packed_replaced_bytes"), mib("packed_bytes"), mib("kv_bytes"));
  return line;
}

Roofline mean_roofline(const std::vector<Roofline>& roofs) {
  Roofline r;
  for (const Roofline& x : roofs) {
    r.read_gb_s += x.read_gb_s / static_cast<double>(roofs.size());
    r.fma_gflop_s += x.fma_gflop_s / static_cast<double>(roofs.size());
    r.int8_gop_s += x.int8_gop_s / static_cast<double>(roofs.size());
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
        auto cost = grammar_cost(engine, o, *grammar);
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
        const double per_tok = p.decode ? bytes_per_tok / 1e9 : m.matmul_flops_per_token() / 1e9;
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
            roofs.push_back({{"read_gb_s", r.read_gb_s}, {"fma_gflop_s", r.fma_gflop_s}, {"int8_gop_s", r.int8_gop_s}});
          j.update({{"ceiling", ceiling}, {"samples_ceiling", ceilings}, {"percent_of_ceiling", pct.mean},
                    {"percent_of_ceiling_stdev", pct.stdev}, {"bound", p.decode ? "memory bandwidth" : "compute"},
                    {"roofline", roofs}});
        }
        all.push_back(j);
        roofs.insert(roofs.end(), p.roofs.begin(), p.roofs.end());
        // Decode moves the weights (and the KV so far) once per token;
        // prefill moves them once for the batch.
        const double flops = m.matmul_flops_per_token();
        const double intensity = p.decode ? flops / bytes_per_tok : flops * p.n / bytes_per_tok;
        points.push_back({p.test + " " + std::string(dtype_name(wtype)), intensity, s.mean * flops / 1e9});
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

const bool registered = register_command(
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
