#include "cli/engine_options.h"

#include <random>

#include "cli/common.h"

namespace duet::cli {

SamplingParams SamplingOptions::resolved() const {
  SamplingParams p = params;
  p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  return p;
}

void add_sampling_options(CLI::App& app, SamplingOptions* o) {
  SamplingParams& s = o->params;
  app.add_option("--temp", s.temperature, "Temperature (0: greedy)")->capture_default_str();
  app.add_option("--top-k", s.top_k, "Top-k (0: off)")->capture_default_str();
  app.add_option("--top-p", s.top_p, "Top-p (1: off)")->capture_default_str();
  app.add_option("--min-p", s.min_p, "Min-p (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  app.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the penalty looks back over")->capture_default_str();
  app.add_option("--frequency-penalty", s.frequency_penalty)->capture_default_str();
  app.add_option("--presence-penalty", s.presence_penalty)->capture_default_str();
  app.add_option("--seed", o->seed, "RNG seed (-1: random)")->capture_default_str();
}

void add_engine_options(CLI::App& app, EngineOptions* o) {
  app.add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  app.add_option("-c,--ctx", o->ctx, "Context length (0: the model's)")->capture_default_str();
  add_kv_type_option(app, o->kv_type);
  add_no_mmap_option(app, o->no_mmap);
  add_spec_options(app, &o->spec);
  add_window_options(app, &o->window);
}

Status apply_engine_options(const EngineOptions& o, const Model& model, EngineConfig& config) {
  DUET_ASSIGN(config.kv_type, kv_type_option(o.kv_type, model.kv_shape()));
  config.n_threads = o.threads;
  config.ctx = o.ctx;
  return apply_window(o.window, model, config);
}

void add_spec_options(CLI::App& app, SpecOptions* o) {
  app.add_option("--draft", o->draft, "Draft model for speculative decoding (same vocabulary)");
  app.add_option("--draft-max", o->draft_max, "Most draft tokens verified per step (adapted to the acceptance rate)")
      ->capture_default_str();
  app.add_option("--lookup", o->lookup,
                 "Speculate by prompt lookup: continue the latest earlier match of the last N tokens (0: off)")
      ->capture_default_str();
}

Status enable_spec(Engine& engine, const SpecOptions& o, std::unique_ptr<Model>& draft) {
  if (o.draft.empty() && o.lookup == 0) return {};
  if (!o.draft.empty() && o.lookup > 0) return err("give --draft or --lookup, not both");
  SpecConfig spec;
  spec.draft_max = o.draft_max;
  spec.lookup = o.lookup;
  if (!o.draft.empty()) {
    auto loaded = Model::load(o.draft);
    if (!loaded) return err("draft model: ", loaded.error().message);
    draft = std::move(*loaded);
    spec.draft = draft.get();
  }
  return engine.enable_speculation(spec);
}

void add_window_options(CLI::App& app, WindowOptions* o) {
  app.add_option("--kv-window", o->window,
                 "Keep only the first --kv-sinks and the last N tokens in the KV cache, so generation "
                 "runs past the context (0: off)")
      ->capture_default_str();
  app.add_option("--kv-sinks", o->sinks, "Attention-sink tokens kept with --kv-window (rounded up to 16)")
      ->capture_default_str();
  app.add_flag("--kv-one-table", o->one_table,
               "One block table for every layer: sliding-window layers (Gemma 2/3) keep the whole sequence "
               "instead of freeing their KV blocks behind the window");
}

Status apply_window(const WindowOptions& o, const Model& model, EngineConfig& config) {
  if (o.window < 0 || o.sinks < 0) return err("--kv-window and --kv-sinks must be >= 0");
  config.kv_layer_groups = !o.one_table;
  if (o.window == 0) return {};
  const int32_t ctx = config.ctx > 0 ? config.ctx : model.config().ctx_len;
  const int32_t kept = blocks_for_tokens(o.sinks) * kBlockTokens + o.window;
  if (kept > ctx)
    return err("--kv-sinks (", o.sinks, ", rounded up to whole blocks of ", kBlockTokens, ") plus --kv-window (",
               o.window, ") is ", kept, " tokens, more than the context of ", ctx);
  config.kv_window = o.window;
  config.kv_sinks = o.sinks;
  return {};
}

}  // namespace duet::cli
