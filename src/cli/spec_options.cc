#include "cli/spec_options.h"

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

}  // namespace duet::cli
