// Helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "model/model.h"

namespace duet::cli {

// Reads a whole file; "-" means standard input.
Result<std::string> read_text(const std::string& path);

// Parses "1 2 3" or "1,2,3" into ids.
Result<std::vector<int32_t>> parse_token_ids(const std::string& text);

// --kv-type NAME for a model with these KV heads: the type, or an error
// naming the option and what it accepts.
Result<KvType> kv_type_option(const std::string& name, const KvShape& shape);
// Adds --kv-type to a subcommand, stored in `name` (its default is the caller's).
void add_kv_type_option(CLI::App& app, std::string& name);

// Adds -t/--threads to a subcommand: the thread pool's size (0: all cores).
void add_threads_option(CLI::App& app, int32_t& threads);

// Adds --no-mmap to a subcommand: read the model into huge-page memory
// instead of mapping it (faster decode of large float models, slower start).
void add_no_mmap_option(CLI::App& app, bool& no_mmap);
inline LoadMode load_mode(bool no_mmap) { return no_mmap ? LoadMode::kRead : LoadMode::kMap; }

// Percentile (0..100) of values, by linear interpolation; 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace duet::cli
