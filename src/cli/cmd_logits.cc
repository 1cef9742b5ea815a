// duet logits: the logits at every position of one prompt, computed as one
// batched forward pass, written as raw float32 [n_tokens][n_vocab]. This is
// what the numerical reference tests compare against PyTorch.
#include <cstdio>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/target_model.h"
#include "model/model.h"

namespace duet::cli {
namespace {

struct LogitsOptions {
  std::string model;
  std::string tokens;
  std::string prompt;
  std::string out;
  int32_t threads = 0;
};

int run(const LogitsOptions& o) {
  auto model = load_target_model(o.model, LoadMode::kMap, o.threads);
  if (!model) return fail(model.error());
  Model& m = **model;
  std::vector<int32_t> ids;
  if (!o.tokens.empty()) {
    auto parsed = parse_token_ids(o.tokens);
    if (!parsed) return fail(parsed.error());
    ids = std::move(*parsed);
  } else {
    ids = m.tokenizer().encode(o.prompt, m.tokenizer().add_bos_default());
  }
  if (ids.empty()) return fail(err("no tokens to evaluate"));

  KvCache cache(with_one_table(m.kv_shape()), blocks_for_tokens(static_cast<int32_t>(ids.size())));
  BlockTable table;
  if (!table.reserve(cache.pool(), static_cast<int32_t>(ids.size())))
    return fail(err("internal: KV cache reservation failed"));
  Batch batch;
  const int32_t s = batch.add_sequence(&table);
  for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), s, true);

  ThreadPool pool(o.threads);
  std::vector<float> logits(ids.size() * static_cast<size_t>(m.config().n_vocab));
  if (Status st = m.forward(batch, cache, pool, logits.data()); !st) return fail(st.error());

  FILE* f = std::fopen(o.out.c_str(), "wb");
  if (!f) return fail(err(o.out, ": cannot open for writing"));
  const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  if (std::fclose(f) != 0 || written != logits.size()) return fail(err(o.out, ": write failed"));
  std::fprintf(stderr, "wrote logits [%zu][%d] to %s\n", ids.size(), m.config().n_vocab, o.out.c_str());
  return 0;
}

const bool logits_registered = register_command(
    "logits", "Write the logits at every position of a prompt (float32 [n][vocab])",
    [](CLI::App& app) {
      auto o = std::make_shared<LogitsOptions>();
      app.add_option("-m,--model", o->model, "Model file (GGUF)")->required();
      auto* tokens = app.add_option("--tokens", o->tokens, "Token ids, space or comma separated");
      app.add_option("-p,--prompt", o->prompt, "Prompt text (tokenized, BOS as the vocabulary says)")
          ->excludes(tokens);
      app.add_option("-o,--output", o->out, "Output file")->required();
      add_threads_option(app, o->threads);
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace duet::cli
