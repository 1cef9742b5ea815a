// --grammar, --grammar-file and --json-schema, shared by the commands that
// generate: each names a grammar the output must follow.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/error.h"
#include "grammar/grammar.h"

namespace duet::cli {

struct GrammarOptions {
  std::string gbnf;         // GBNF text
  std::string gbnf_file;    // a file of GBNF
  std::string schema_file;  // a JSON Schema file
};

void add_grammar_options(CLI::App& app, GrammarOptions* o);

// The compiled grammar, or null when none was asked for; an error names
// the option and what is wrong with its grammar or schema.
Result<std::shared_ptr<const Grammar>> load_grammar(const GrammarOptions& o);

}  // namespace duet::cli
