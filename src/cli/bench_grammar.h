// `duet bench --grammar/--json-schema`: decode under a grammar against
// decode without it. Each repetition runs the two back to back with the
// same sampler and seed (temperature 0.8, top-k 40: greedy on random
// weights repeats one token inside the first string, which would time one
// cached mask), so the machine's load drifts hit both alike. ITL is
// compared over the tokens both runs made: the grammar may end its run
// early, and later tokens attend to more KV.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"

namespace duet::cli {

struct GrammarCost {
  std::vector<double> free_ms, constrained_ms;  // mean ITL per repetition
  std::vector<double> grammar_ms;               // per token, timed inside the engine
  std::vector<int32_t> n_tokens;                // tokens compared per repetition
};

// `reps` pairs of n_gen-token decodes, without and with `grammar`.
Result<GrammarCost> grammar_cost(Engine& engine, int32_t reps, int32_t n_gen, std::shared_ptr<const Grammar> grammar);
// Prints the comparison (unless json) and returns it as a JSON row.
nlohmann::json report_grammar_cost(const GrammarCost& c, const std::string& model, double compile_ms, bool json);

}  // namespace duet::cli
