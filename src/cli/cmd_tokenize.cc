// `duet tokenize -m FILE TEXT`: the token ids a model's vocabulary gives a
// text, to check prompts and compare with other tokenizers. --jsonl turns it
// into a batch tool: each input line is a JSON string, each output line a JSON
// object with the ids and the text they decode back to.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "cli/common.h"
#include "core/json_parse.h"
#include "formats/gguf.h"
#include "formats/hf_tokenizer_import.h"
#include "tokenizer/tokenizer.h"

namespace duet::cli {
namespace {

struct Options {
  std::string model;
  std::string tokenizer_json;
  std::string text;
  bool have_text = false;  // given as an argument (possibly empty)
  std::string file;
  bool no_bos = false;
  bool pieces = false;
  bool parse_special = false;
  bool jsonl = false;
};

// A vocabulary entry as one printable token: control bytes escaped.
std::string printable(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

void print_ids(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
}

Result<void> run_jsonl(const Tokenizer& tok, const Options& o, const std::string& input) {
  std::istringstream in(input);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const auto value = parse_json(line);
    const nlohmann::json parsed = value.ok() ? *value : nlohmann::json();
    if (!parsed.is_string())
      return err("--jsonl input line ", line_no, " is not a JSON string");
    const std::vector<int32_t> ids =
        tok.encode(parsed.get<std::string>(), !o.no_bos && tok.add_bos_default(), o.parse_special);
    const nlohmann::json out = {{"ids", ids}, {"text", tok.decode(ids)}};
    std::printf("%s\n", out.dump().c_str());
  }
  return {};
}

// A Hugging Face tokenizer.json (and the tokenizer_config.json beside it, if
// any) as the tokenizer metadata of an in-memory GGUF vocabulary.
Result<GgufFile> open_tokenizer_json(const std::string& path) {
  HfTokenizerFiles files;
  files.tokenizer_json = path;
  const auto config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config)) files.tokenizer_config = config.string();
  GgufWriter w;
  DUET_TRY(set_hf_tokenizer_metadata(w, files));
  return GgufFile::assemble(path, w.metadata(), {}, nullptr);
}

int run(const Options& o) {
  if (o.have_text && !o.file.empty())
    return fail(err("give the text either as an argument or with -f PATH, not both"));
  if (!o.have_text && o.file.empty() && !o.jsonl)
    return fail(err("no text: give it as an argument or with -f PATH ('-' for stdin)"));
  if (o.have_text && o.jsonl) return fail(err("--jsonl reads its lines from -f PATH or stdin"));
  if (o.model.empty() == o.tokenizer_json.empty())
    return fail(err("give exactly one of -m MODEL.gguf and --tokenizer tokenizer.json"));
  auto gguf = o.model.empty() ? open_tokenizer_json(o.tokenizer_json) : GgufFile::open(o.model);
  if (!gguf) return fail(gguf.error());
  auto tok = Tokenizer::from_gguf(*gguf);
  if (!tok) return fail(tok.error());

  std::string text = o.text;
  if (!o.file.empty() || o.jsonl) {
    auto read = read_text(o.file.empty() ? "-" : o.file);
    if (!read) return fail(read.error());
    text = std::move(*read);
  }
  if (o.jsonl) {
    if (auto r = run_jsonl(**tok, o, text); !r) return fail(r.error());
    return 0;
  }

  const std::vector<int32_t> ids =
      (*tok)->encode(text, !o.no_bos && (*tok)->add_bos_default(), o.parse_special);
  if (o.pieces) {
    for (int32_t id : ids) std::printf("%d '%s'\n", id, printable((*tok)->token_text(id)).c_str());
  } else {
    print_ids(ids);
  }
  return 0;
}

const bool tokenize_registered = register_command(
    "tokenize", "Print the token ids of a text under a model's vocabulary",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("-m,--model", o->model, "GGUF file with a tokenizer (model or vocab only)");
      app.add_option("--tokenizer", o->tokenizer_json,
                     "A Hugging Face tokenizer.json (byte-level BPE) instead of a GGUF file");
      CLI::Option* text = app.add_option("text", o->text, "Text to tokenize");
      app.add_option("-f,--file", o->file, "Read the text from a file ('-' for stdin)");
      app.add_flag("--no-bos", o->no_bos, "Do not add the BOS token");
      app.add_flag("--pieces", o->pieces, "Print one 'id piece' line per token");
      app.add_flag("--parse-special", o->parse_special,
                   "Turn the text of control tokens (e.g. <s>) into those tokens");
      app.add_flag("--jsonl", o->jsonl,
                   "Each input line (from -f, default stdin) is a JSON string; print one JSON "
                   "object {ids, text} per line, text being the ids decoded");
      return [o, text]() {
        o->have_text = text->count() > 0;
        return run(*o);
      };
    });

}  // namespace
}  // namespace duet::cli
