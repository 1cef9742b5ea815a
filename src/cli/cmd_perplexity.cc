// duet perplexity -m MODEL -f TEXT: perplexity of a text by strided windows
// (the method Hugging Face documents for fixed-length models, used with
// wikitext): the whole text is tokenized once (BOS first when the vocabulary
// asks for it); windows of ctx tokens start every `stride` tokens, each run
// as a fresh sequence in one batched forward; a window scores only the tokens
// no earlier window scored, so every token after the first is scored exactly
// once, with between ctx - stride and ctx - 1 tokens of context (the first
// window: all it has). Unlike llama.cpp's perplexity, no BOS is put in front
// of later windows and their first halves are not skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/progress.h"
#include "cli/common.h"
#include "cli/target_model.h"
#include "model/model.h"

namespace duet::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string file;
  int32_t ctx = 0;
  int32_t stride = 0;
  int32_t threads = 0;
  std::string kv_type = "f16";
  bool json = false;
};

// Per-token negative log-likelihoods (natural log), running mean and
// variance by Welford's update (no cancellation when all losses are equal).
struct Score {
  int64_t tokens = 0;
  int32_t windows = 0;
  double mean_nll = 0;
  double m2 = 0;  // sum of squared deviations from the mean

  void add(double nll) {
    ++tokens;
    const double delta = nll - mean_nll;
    mean_nll += delta / static_cast<double>(tokens);
    m2 += delta * (nll - mean_nll);
  }
  double perplexity() const { return std::exp(mean_nll); }
  // Standard error of the perplexity, from the sample variance of the
  // per-token NLL (delta method: d exp(m) = exp(m) dm).
  double std_error() const {
    if (tokens < 2) return 0;
    const double n = static_cast<double>(tokens);
    return perplexity() * std::sqrt(m2 / (n - 1) / n);
  }
};

// -log softmax(row)[target], in double.
double token_nll(const float* row, int32_t n_vocab, int32_t target) {
  float max = row[0];
  for (int32_t v = 1; v < n_vocab; ++v) max = std::max(max, row[v]);
  double sum = 0;
  for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
  return std::log(sum) + max - row[target];
}

Result<Score> score_text(Model& m, const std::vector<int32_t>& ids, int32_t ctx, int32_t stride,
                         KvType kv_type, ThreadPool& pool) {
  const int32_t n = static_cast<int32_t>(ids.size());
  const int32_t n_vocab = m.config().n_vocab;
  KvCache cache(with_one_table(m.kv_shape()), blocks_for_tokens(ctx), kv_type);
  std::vector<float> logits;  // [scored rows][n_vocab]
  Score score;
  ProgressBar bar("perplexity", n - 1, "tokens");
  int32_t scored_end = 1;  // tokens before this have been scored (token 0 never is)
  for (int32_t begin = 0; scored_end < n; begin += stride) {
    const int32_t end = std::min(begin + ctx, n);
    // Row r predicts token begin + r + 1; only rows whose target is new want logits.
    const int32_t first_row = scored_end - 1 - begin;
    BlockTable table;
    if (!table.reserve(cache.pool(), end - begin))
      return err("internal: KV cache reservation of ", end - begin, " tokens failed");
    Batch batch;
    const int32_t s = batch.add_sequence(&table);
    for (int32_t r = 0; r < end - begin; ++r)
      batch.add(ids[static_cast<size_t>(begin + r)], r, s, r >= first_row && r < end - begin - 1);
    logits.resize(static_cast<size_t>(batch.n_logits()) * static_cast<size_t>(n_vocab));
    Status st = m.forward(batch, cache, pool, logits.data());
    table.release_all(cache.pool());
    DUET_TRY(st);
    for (int32_t r = first_row, row = 0; r < end - begin - 1; ++r, ++row)
      score.add(token_nll(&logits[static_cast<size_t>(row) * n_vocab], n_vocab,
                          ids[static_cast<size_t>(begin + r + 1)]));
    scored_end = end;
    ++score.windows;
    bar.update(scored_end - 1);
  }
  return score;
}

int run(const PerplexityArgs& a) {
  auto model = load_target_model(a.model, LoadMode::kMap, a.threads);
  if (!model) return fail(model.error());
  Model& m = **model;
  auto kv_type = kv_type_option(a.kv_type, m.kv_shape());
  if (!kv_type) return fail(kv_type.error());
  auto text = read_text(a.file);
  if (!text) return fail(text.error());
  const std::vector<int32_t> ids = m.tokenizer().encode(*text, m.tokenizer().add_bos_default());
  if (ids.size() < 2) return fail(err(a.file, ": fewer than 2 tokens, nothing to score"));

  int32_t ctx = a.ctx;
  if (ctx == 0) ctx = m.config().ctx_len > 0 ? m.config().ctx_len : 512;
  if (ctx < 2) return fail(err("--ctx ", ctx, " must be at least 2"));
  if (m.config().ctx_len > 0 && ctx > m.config().ctx_len)
    return fail(err("--ctx ", ctx, " exceeds the model's context length ", m.config().ctx_len));
  ctx = std::min<int32_t>(ctx, static_cast<int32_t>(ids.size()));
  const int32_t stride = a.stride > 0 ? a.stride : std::max(1, ctx / 2);
  if (stride > ctx - 1)
    return fail(err("--stride ", stride, " must be below the window (", ctx,
                    " tokens), or tokens would go unscored"));

  ThreadPool pool(a.threads);
  auto score = score_text(m, ids, ctx, stride, *kv_type, pool);
  if (!score) return fail(score.error());
  if (a.json) {
    nlohmann::json j = {{"perplexity", score->perplexity()}, {"std_error", score->std_error()},
                        {"nll_mean", score->mean_nll},         {"tokens", score->tokens},
                        {"windows", score->windows},         {"ctx", ctx},
                        {"stride", stride},                    {"kv_type", a.kv_type}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("perplexity: %.4f +/- %.4f (%lld tokens scored, %d windows, ctx %d, stride %d, KV %s)\n",
                score->perplexity(), score->std_error(), static_cast<long long>(score->tokens),
                score->windows, ctx, stride, a.kv_type.c_str());
  }
  return 0;
}

const bool perplexity_registered = register_command(
    "perplexity", "Perplexity of a text file by strided windows",
    [](CLI::App& app) {
      auto a = std::make_shared<PerplexityArgs>();
      app.add_option("-m,--model", a->model, "Model file (GGUF)")->required();
      app.add_option("-f,--file", a->file, "Text file ('-' for stdin)")->required();
      app.add_option("-c,--ctx", a->ctx, "Tokens per window (0: the model's context, at most the text)");
      app.add_option("--stride", a->stride, "Tokens between window starts (0: half the window)");
      add_threads_option(app, a->threads);
      add_kv_type_option(app, a->kv_type);
      app.add_flag("--json", a->json, "Print one JSON object");
      return [a] { return run(*a); };
    });

}  // namespace
}  // namespace duet::cli
