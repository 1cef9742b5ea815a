// duet run: one request from the terminal, streamed to stdout, with the
// phase figures (TTFT/prefill, ITL/decode) on stderr at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/target_model.h"
#include "cli/engine_options.h"
#include "cli/grammar_option.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "formats/type_mix.h"
#include "tokenizer/tokenizer.h"

namespace duet::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int32_t n_predict = 256;
  SamplingOptions sampling;
  EngineOptions engine;
  GrammarOptions grammar;
  bool ignore_eos = false;
  bool json = false;
  bool no_bos = false;
  bool no_warmup = false;
  bool verbose = false;
};

struct RunStats {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  RequestTimings timings;
  uint64_t seed = 0;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  int32_t peak_blocks = 0;
  std::string arch;
  std::vector<TypeShare> type_mix;
};

// Of a mixture of experts, how evenly this run routed: a line, or with
// --verbose a line per layer (the experts' loads as a histogram).
void print_routing(const RunOptions& o, const Model& model) {
  const std::vector<LayerExpertLoad> layers = expert_loads(model.expert_token_counts(), model.config().n_experts);
  if (layers.empty()) return;
  const ModelConfig& c = model.config();
  const auto worst = std::max_element(layers.begin(), layers.end(),
                                      [](const auto& a, const auto& b) { return a.max() < b.max(); });
  double idle = 0;
  for (const LayerExpertLoad& l : layers) idle += l.idle();
  std::fprintf(stderr, "experts:          %d of %d per token; busiest expert %.2fx its fair share (layer %d), "
               "%.1f idle per layer\n", c.n_experts_used, c.n_experts, worst->max(), worst->layer, idle / layers.size());
  if (!o.verbose) return;
  static const double kBounds[] = {0.0, 0.5, 0.8, 1.25, 2.0, 4.0};
  std::fprintf(stderr, "  experts by load (tokens / layer mean):  =0  <=.5  <=.8 <=1.25  <=2  <=4   >4\n");
  for (const LayerExpertLoad& l : layers) {
    int bins[7] = {};
    for (double x : l.load) ++bins[std::upper_bound(std::begin(kBounds), std::end(kBounds), x - 1e-12) - std::begin(kBounds)];
    std::fprintf(stderr, "  layer %3d (%8llu tokens):               %4d %4d %4d %5d %4d %4d %4d\n", l.layer,
                 static_cast<unsigned long long>(l.tokens), bins[0], bins[1], bins[2], bins[3], bins[4], bins[5], bins[6]);
  }
}

// Sliding-window layers in block tables of their own (kv/kv_groups.h).
std::string kv_groups_note(const KvCache& cache) {
  const KvGroups& g = cache.groups();
  if (g.n_groups() == 1) return "";
  int32_t windowed = 0;
  for (int32_t w : g.window) windowed += w > 0;
  return "; " + std::to_string(g.n_groups()) + " block tables of " + std::to_string(g.layers_per_block) +
         " layers, " + std::to_string(windowed) + " freed behind the sliding window";
}

void print_stats(const RunOptions& o, const RunStats& s, const Engine& engine) {
  const RequestTimings& t = s.timings;
  std::vector<double> itl;  // ms between consecutive tokens
  for (size_t i = 1; i < t.token_times.size(); ++i)
    itl.push_back((t.token_times[i] - t.token_times[i - 1]) * 1e3);
  const double ttft_ms = t.first_token * 1e3;
  const double prefill_tps = t.first_token > 0 ? t.n_prompt / t.first_token : 0.0;
  const double decode_s = t.token_times.size() > 1 ? t.token_times.back() - t.token_times.front() : 0;
  const double decode_tps = decode_s > 0 ? static_cast<double>(itl.size()) / decode_s : 0.0;
  const size_t kv_bytes = static_cast<size_t>(s.peak_blocks) * engine.cache().bytes_per_block();
  const double acceptance = t.n_drafted ? static_cast<double>(t.n_accepted) / t.n_drafted : 0.0;
  const double per_pass = t.n_passes ? static_cast<double>(t.n_generated) / t.n_passes : 0.0;
  if (o.json) {
    nlohmann::json j = {
        {"prompt_tokens", t.n_prompt},
        {"generated_tokens", t.n_generated},
        {"ttft_ms", ttft_ms},
        {"prefill_tok_s", prefill_tps},
        {"decode_tok_s", decode_tps},
        {"itl_ms", {{"p50", percentile(itl, 50)}, {"p90", percentile(itl, 90)}, {"p99", percentile(itl, 99)}}},
        {"kv_cache_bytes", kv_bytes},
        {"kv_bytes_per_token", engine.cache().bytes_per_token()},
        {"kv_type", kv_type_name(engine.cache().type())},
        {"finish_reason", finish_reason_name(s.reason)},
        {"speculative", {{"drafted", t.n_drafted}, {"accepted", t.n_accepted}, {"acceptance_rate", acceptance},
                         {"target_passes", t.n_passes}, {"tokens_per_pass", per_pass}}},
        {"seed", s.seed},
        {"prompt_ids", s.prompt_ids},
        {"generated_ids", s.generated_ids},
        {"architecture", s.arch},
    };
    for (const TypeShare& m : s.type_mix)
      j["type_mix"].push_back({{"type", dtype_name(m.type)}, {"tensors", m.tensors}, {"bytes", m.bytes}});
    if (const std::vector<uint64_t> counts = engine.model().expert_token_counts(); !counts.empty())
      j["expert_tokens"] = {{"experts", engine.model().config().n_experts}, {"by_layer_and_expert", counts}};
    std::fprintf(stderr, "%s\n", j.dump().c_str());
    return;
  }
  std::fprintf(stderr, "\n\nprompt tokens:    %d\ngenerated tokens: %d (%s)\n", t.n_prompt,
               t.n_generated, finish_reason_name(s.reason));
  std::fprintf(stderr, "TTFT:             %.2f ms (prefill %.1f tok/s)\n", ttft_ms, prefill_tps);
  std::fprintf(stderr, "decode:           %.1f tok/s\n", decode_tps);
  std::fprintf(stderr, "ITL p50/p90/p99:  %.2f / %.2f / %.2f ms\n", percentile(itl, 50),
               percentile(itl, 90), percentile(itl, 99));
  std::fprintf(stderr, "KV cache:         %zu bytes used (%d blocks of %d tokens, %s, %zu bytes/token%s)\n",
               kv_bytes, s.peak_blocks, kBlockTokens, std::string(kv_type_name(engine.cache().type())).c_str(),
               engine.cache().bytes_per_token(), kv_groups_note(engine.cache()).c_str());
  if (engine.speculating())
    std::fprintf(stderr, "speculative:      %d of %d drafts accepted (%.1f%%), %.2f tokens per target pass\n",
                 t.n_accepted, t.n_drafted, 100.0 * acceptance, per_pass);
  print_routing(o, engine.model());
}

int run(RunOptions o) {
  if (!o.prompt.empty() && !o.prompt_file.empty())
    return fail(err("give the prompt with -p or -f, not both"));
  if (!o.prompt_file.empty()) {
    auto text = read_text(o.prompt_file);
    if (!text) return fail(text.error());
    o.prompt = std::move(*text);
  }
  if (o.n_predict < 0) return fail(err("-n must be >= 0"));
  // Before the model loads: a grammar that does not compile fails fast.
  auto grammar = load_grammar(o.grammar);
  if (!grammar) return fail(grammar.error());

  auto model = load_target_model(o.model, load_mode(o.engine.no_mmap), o.engine.threads);
  if (!model) return fail(model.error());
  const Tokenizer& tok = (*model)->tokenizer();

  RunStats stats;
  // What is running: the architecture and the quant mix, not just the file
  // name; one line now, or fields of the JSON object (the whole of stderr).
  stats.arch = (*model)->config().arch_name();
  stats.type_mix = type_mix((*model)->file().tensors());
  if (!o.json) std::fprintf(stderr, "model: %s, %s\n", stats.arch.c_str(), format_type_mix(stats.type_mix).c_str());
  if (const std::string notes = (*model)->load_notes(); !notes.empty()) std::fprintf(stderr, "note: %s\n", notes.c_str());
  stats.prompt_ids = tok.encode(o.prompt, !o.no_bos && tok.add_bos_default());
  EngineConfig config;
  if (Status st = apply_engine_options(o.engine, **model, config); !st) return fail(st.error());
  config.scheduler.max_seqs = 1;
  config.scheduler.max_batch_tokens = std::max<int32_t>(512, static_cast<int32_t>(stats.prompt_ids.size()));
  Engine engine(**model, config);
  std::unique_ptr<Model> draft;
  if (Status st = enable_spec(engine, o.engine.spec, draft); !st) return fail(st.error());

  RequestParams params;
  params.sampling = o.sampling.resolved();
  stats.seed = params.sampling.seed;
  params.max_tokens = o.n_predict;
  params.ignore_eos = o.ignore_eos;
  params.grammar = *grammar;

  std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
  std::fflush(stdout);
  if (o.n_predict == 0) return 0;
  if (!o.no_warmup && !stats.prompt_ids.empty())
    if (Status st = engine.warm_up(stats.prompt_ids.front()); !st) return fail(st.error());
  auto id = engine.submit(stats.prompt_ids, params, [&](const TokenEvent& ev) {
    stats.peak_blocks = std::max(stats.peak_blocks, engine.cache().pool().n_used());
    if (ev.token >= 0) stats.generated_ids.push_back(ev.token);
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    if (ev.finished) {
      stats.timings = *ev.timings;
      stats.reason = ev.reason;
      stats.error = ev.error;
    }
  });
  if (!id) return fail(id.error());
  if (Status st = engine.run_until_idle(); !st) return fail(st.error());

  if (stats.reason == FinishReason::kError) return fail(err(stats.error));
  if (stats.reason == FinishReason::kContext && !o.json)
    std::fprintf(stderr, "\nduet: context full (%d tokens); stopped\n", engine.ctx());
  print_stats(o, stats, engine);
  return 0;
}

const bool run_registered = register_command(
    "run", "Generate text from a prompt, streamed to stdout", [](CLI::App& app) {
      auto o = std::make_shared<RunOptions>();
      app.add_option("-m,--model", o->model, "Model file (GGUF)")->required();
      app.add_option("-p,--prompt", o->prompt, "Prompt text");
      app.add_option("-f,--file", o->prompt_file, "Read the prompt from a file ('-' for stdin)");
      app.add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->capture_default_str();
      add_sampling_options(app, &o->sampling);
      add_engine_options(app, &o->engine);
      add_grammar_options(app, &o->grammar);
      app.add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-sequence");
      app.add_flag("--no-bos", o->no_bos, "Do not add the BOS token");
      app.add_flag("--no-warmup", o->no_warmup,
                   "Skip the one-token pass before the prompt (then TTFT includes the first touch of the KV cache)");
      app.add_flag("--json", o->json, "Print the stats as one JSON object on stderr");
      app.add_flag("-v,--verbose", o->verbose, "Print more stats: a mixture of experts' routing per layer");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace duet::cli
