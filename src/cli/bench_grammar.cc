#include "cli/bench_grammar.h"

#include <algorithm>
#include <cstdio>

#include "cli/bench_spread.h"

namespace duet::cli {
namespace {

// When each generated token was sampled, in seconds from submission.
RequestTimings decode_timings(Engine& engine, int32_t first, int32_t n, std::shared_ptr<const Grammar> grammar,
                              uint64_t seed) {
  RequestParams params;
  params.sampling.seed = seed;
  params.ignore_eos = true;
  params.max_tokens = n;
  params.grammar = std::move(grammar);
  RequestTimings timings;
  auto id = engine.submit({first}, params, [&](const TokenEvent& ev) {
    if (ev.finished) timings = *ev.timings;
  });
  if (!id || !engine.run_until_idle()) return {};
  return timings;
}

double mean_itl_ms(const std::vector<double>& times, size_t n) {
  return 1000.0 * (times[n - 1] - times[0]) / static_cast<double>(n - 1);
}

}  // namespace

Result<GrammarCost> grammar_cost(Engine& engine, int32_t reps, int32_t n_gen, std::shared_ptr<const Grammar> grammar) {
  const int32_t first = engine.model().tokenizer().bos_id() >= 0 ? engine.model().tokenizer().bos_id() : 0;
  decode_timings(engine, first, 8, grammar, 1);  // builds the vocabulary's trie, pages the weights in
  GrammarCost c;
  for (int32_t r = 0; r < reps; ++r) {
    const auto seed = static_cast<uint64_t>(r + 1);
    const std::vector<double> free = decode_timings(engine, first, n_gen, nullptr, seed).token_times;
    const RequestTimings constrained = decode_timings(engine, first, n_gen, grammar, seed);
    const size_t n = std::min(free.size(), constrained.token_times.size());
    if (n < 2)
      return err("the grammar let the model write ", constrained.token_times.size(), " tokens: too few to time");
    c.free_ms.push_back(mean_itl_ms(free, n));
    c.constrained_ms.push_back(mean_itl_ms(constrained.token_times, n));
    c.grammar_ms.push_back(1000.0 * constrained.grammar_seconds / static_cast<double>(constrained.token_times.size()));
    c.n_tokens.push_back(static_cast<int32_t>(n));
  }
  return c;
}

nlohmann::json report_grammar_cost(const GrammarCost& c, const std::string& model, double compile_ms, bool json) {
  const Spread f = spread(c.free_ms), g = spread(c.constrained_ms);
  std::vector<double> ratios;
  for (size_t r = 0; r < c.free_ms.size(); ++r) ratios.push_back(c.constrained_ms[r] / c.free_ms[r]);
  const Spread ratio = spread(ratios);
  // A burst of other work on a shared machine lands in one run of a pair:
  // the median of the pairs' ratios is steadier than their mean.
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  // The engine's own account of the grammar's time: far less noisy than a
  // difference of two ITLs on a shared machine.
  const Spread gm = spread(c.grammar_ms);
  const double share = gm.mean / f.mean;
  if (!json)
    std::printf("grammar %s: ITL %.2f ± %.2f ms free, %.2f ± %.2f ms constrained, ratio %.3f ± %.3f (median %.3f); "
                "grammar work %.3f ± %.3f ms/token = %.2f%% of free ITL (%d tokens, compiled in %.2f ms)\n",
                model.c_str(), f.mean, f.stdev, g.mean, g.stdev, ratio.mean, ratio.stdev, median, gm.mean, gm.stdev,
                100.0 * share, c.n_tokens.front(), compile_ms);
  return {{"model", model}, {"test", "grammar"}, {"itl_ms", f.mean}, {"itl_constrained_ms", g.mean},
          {"ratio", ratio.mean}, {"ratio_stdev", ratio.stdev}, {"ratio_median", median},
          {"samples_ratio", ratios},
          {"grammar_ms_per_token", gm.mean}, {"samples_grammar_ms", c.grammar_ms}, {"grammar_share_of_itl", share},
          {"n_tokens", c.n_tokens}, {"compile_ms", compile_ms}};
}

}  // namespace duet::cli
