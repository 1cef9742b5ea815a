#include "cli/engine_options.h"

namespace duet::cli {

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
}

Status apply_window(const WindowOptions& o, const Model& model, EngineConfig& config) {
  if (o.window < 0 || o.sinks < 0) return err("--kv-window and --kv-sinks must be >= 0");
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
