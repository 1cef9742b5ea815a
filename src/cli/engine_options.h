// Options shared by the subcommands that drive the engine (run, chat,
// serve): sampling, threads / context / KV type, speculative decoding
// (`--draft MODEL --draft-max K --lookup N`) and the KV window
// (`--kv-window W --kv-sinks S`).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/error.h"
#include "engine/engine.h"

namespace duet::cli {

// --temp --top-k --top-p --min-p, the penalties and --seed.
struct SamplingOptions {
  SamplingParams params;
  int64_t seed = -1;  // -1: random
  // The parameters with the seed drawn where none was given.
  SamplingParams resolved() const;
};
void add_sampling_options(CLI::App& app, SamplingOptions* o);

struct SpecOptions {
  std::string draft;      // draft model file; empty: none
  int32_t draft_max = 5;  // most tokens proposed per step
  int32_t lookup = 0;     // prompt-lookup n-gram length; 0: off
};

void add_spec_options(CLI::App& app, SpecOptions* o);

// Loads the draft model (kept in `draft`, which must outlive the engine) and
// turns speculation on; does nothing when neither option is given.
Status enable_spec(Engine& engine, const SpecOptions& o, std::unique_ptr<Model>& draft);

// `--kv-window W --kv-sinks S` (StreamingLLM) and `--kv-one-table`, into an
// engine configuration.
struct WindowOptions {
  int32_t window = 0;
  int32_t sinks = 4;
  bool one_table = false;  // sliding-window layers keep the whole sequence too
};
void add_window_options(CLI::App& app, WindowOptions* o);
// Checks the options against the context length (0: the model's) and sets them.
Status apply_window(const WindowOptions& o, const Model& model, EngineConfig& config);

// -t, -c, --kv-type, --no-mmap, and the speculative and window options.
struct EngineOptions {
  int32_t threads = 0;
  int32_t ctx = 0;
  std::string kv_type = "f16";
  bool no_mmap = false;
  SpecOptions spec;
  WindowOptions window;
};
void add_engine_options(CLI::App& app, EngineOptions* o);
// The options into an engine configuration for `model` (scheduler left as is).
Status apply_engine_options(const EngineOptions& o, const Model& model, EngineConfig& config);

}  // namespace duet::cli
