// `duet bench`'s memory report: resident memory after the runs (every
// weight touched) beside what it should be: the weights once (mapped in
// place, or packed in place of their file bytes) plus the KV cache, with
// nothing copied twice.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"
#include "model/model.h"

namespace duet::cli {

// The report as JSON (bytes, and rss_over_expected).
nlohmann::json memory_report(const Model& m, const Engine& engine, bool no_mmap);
// One line of it for the table.
std::string memory_line(const std::string& name, const nlohmann::json& j);

}  // namespace duet::cli
