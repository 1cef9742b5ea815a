// Engine options shared by `duet run` and `duet serve`: speculative decoding
// (`--draft MODEL --draft-max K --lookup N`) and the KV window
// (`--kv-window W --kv-sinks S`).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/error.h"
#include "engine/engine.h"

namespace duet::cli {

struct SpecOptions {
  std::string draft;      // draft model file; empty: none
  int32_t draft_max = 5;  // most tokens proposed per step
  int32_t lookup = 0;     // prompt-lookup n-gram length; 0: off
};

void add_spec_options(CLI::App& app, SpecOptions* o);

// Loads the draft model (kept in `draft`, which must outlive the engine) and
// turns speculation on; does nothing when neither option is given.
Status enable_spec(Engine& engine, const SpecOptions& o, std::unique_ptr<Model>& draft);

// `--kv-window W --kv-sinks S` (StreamingLLM), into an engine configuration.
struct WindowOptions {
  int32_t window = 0;
  int32_t sinks = 4;
};
void add_window_options(CLI::App& app, WindowOptions* o);
// Checks the options against the context length (0: the model's) and sets them.
Status apply_window(const WindowOptions& o, const Model& model, EngineConfig& config);

}  // namespace duet::cli
