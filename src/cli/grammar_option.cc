#include "cli/grammar_option.h"

#include "cli/common.h"
#include "grammar/json_schema.h"

namespace duet::cli {

void add_grammar_options(CLI::App& app, GrammarOptions* o) {
  app.add_option("--grammar", o->gbnf, "Constrain the output to this GBNF grammar (rule 'root')");
  app.add_option("--grammar-file", o->gbnf_file, "Constrain the output to the GBNF grammar in this file");
  app.add_option("--json-schema", o->schema_file, "Constrain the output to JSON valid under this JSON Schema file");
}

Result<std::shared_ptr<const Grammar>> load_grammar(const GrammarOptions& o) {
  const int given = !o.gbnf.empty() + !o.gbnf_file.empty() + !o.schema_file.empty();
  if (given > 1) return err("give only one of --grammar, --grammar-file and --json-schema");
  if (!o.gbnf.empty()) {
    auto g = Grammar::from_gbnf(o.gbnf);
    if (!g.ok()) return err("--grammar: ", g.error().message);
    return *g;
  }
  if (!o.gbnf_file.empty()) {
    DUET_ASSIGN(std::string text, read_text(o.gbnf_file));
    auto g = Grammar::from_gbnf(text);
    if (!g.ok()) return err("--grammar-file ", o.gbnf_file, ": ", g.error().message);
    return *g;
  }
  if (!o.schema_file.empty()) {
    DUET_ASSIGN(std::string text, read_text(o.schema_file));
    auto g = json_schema_to_grammar(text);
    if (!g.ok()) return err("--json-schema ", o.schema_file, ": ", g.error().message);
    return *g;
  }
  return std::shared_ptr<const Grammar>();
}

}  // namespace duet::cli
