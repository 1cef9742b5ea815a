// Speculative decoding: the acceptance rule keeps the target's distribution
// (checked by chi-square tests), and the engine's output with a draft model
// or prompt lookup equals plain decoding — token for token when greedy, in
// distribution when sampling — alone and in a batch.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/llama_synth.h"
#include "engine/stories_model.h"
#include "quantize/quantize_gguf.h"
#include "test_util.h"

namespace duet {
namespace {

// Upper critical value of chi-square with df degrees of freedom at a false
// alarm rate of 1e-4 (z = 3.719), by the Wilson–Hilferty approximation.
double chi_square_critical(int df) {
  const double z = 3.719, a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Two-sample chi-square of equal-sized samples; categories seen fewer than
// 10 times in both together are pooled. Returns {statistic, df}.
std::pair<double, int> two_sample_chi_square(const std::map<int32_t, int>& a,
                                             const std::map<int32_t, int>& b) {
  std::map<int32_t, std::pair<int, int>> both;
  for (auto [k, v] : a) both[k].first += v;
  for (auto [k, v] : b) both[k].second += v;
  std::vector<std::pair<int, int>> cells;
  std::pair<int, int> pooled{0, 0};
  for (auto [k, c] : both) {
    if (c.first + c.second >= 10) cells.push_back(c);
    else pooled = {pooled.first + c.first, pooled.second + c.second};
  }
  if (pooled.first + pooled.second > 0) cells.push_back(pooled);
  double stat = 0;
  for (auto [x, y] : cells) stat += static_cast<double>(x - y) * (x - y) / (x + y);
  return {stat, static_cast<int>(cells.size()) - 1};
}

TokenDist dist(std::vector<double> w) {
  TokenDist d;
  double total = 0;
  for (double x : w) total += x;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0) d.push_back({static_cast<int32_t>(i), w[i] / total});
  return d;
}

// Draft d ~ q, then the rule: the output must be distributed as p.
void expect_rule_keeps_target(const TokenDist& p, const TokenDist& q, bool deterministic_q) {
  SamplingParams sp;
  sp.seed = 7;
  Sampler rng(sp);
  TokenDist residual;
  constexpr int kTrials = 200000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < kTrials; ++i) {
    const int32_t d = rng.draw(q);
    ++counts[accept_or_resample(p, deterministic_q ? TokenDist{} : q, d, rng, residual).token];
  }
  double stat = 0;
  for (const TokenProb& t : p) {
    const double expected = t.p * kTrials;
    const double seen = counts[t.id];
    stat += (seen - expected) * (seen - expected) / expected;
    counts.erase(t.id);
  }
  EXPECT_TRUE(counts.empty()) << "a token outside p's support was emitted";
  const int df = static_cast<int>(p.size()) - 1;
  EXPECT_LT(stat, chi_square_critical(df)) << "df " << df;
}

TEST(SpeculativeRule, OutputIsDistributedAsTheTarget) {
  // q puts mass where p has none (token 5) and misses one of p's tokens (4).
  const TokenDist p = dist({0.30, 0.25, 0.20, 0.10, 0.15, 0.0, 0.0});
  const TokenDist q = dist({0.05, 0.40, 0.20, 0.20, 0.00, 0.15, 0.0});
  expect_rule_keeps_target(p, q, false);
}

TEST(SpeculativeRule, DeterministicDraftsKeepTheTarget) {
  const TokenDist p = dist({0.5, 0.3, 0.2});
  for (int32_t d = 0; d < 4; ++d) expect_rule_keeps_target(p, {{d, 1.0}}, true);
}

TEST(SpeculativeRule, GreedyAcceptsExactlyTheArgmax) {
  Sampler rng(SamplingParams::greedy());
  TokenDist residual;
  const TokenDist p = {{3, 1.0}};
  EXPECT_TRUE(accept_or_resample(p, {}, 3, rng, residual).accepted);
  const Verdict v = accept_or_resample(p, {}, 2, rng, residual);
  EXPECT_FALSE(v.accepted);
  EXPECT_EQ(v.token, 3);
}

TEST(SpeculativeRule, DraftLengthFollowsTheAcceptanceRate) {
  EXPECT_EQ(adaptive_draft_len(0.1, 8), 1);
  EXPECT_EQ(adaptive_draft_len(0.5, 8), 2);
  EXPECT_EQ(adaptive_draft_len(0.99, 8), 8);
  EXPECT_LE(adaptive_draft_len(0.7, 8), adaptive_draft_len(0.8, 8));
}

TEST(PromptLookup, ContinuesTheLatestLongestMatch) {
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 2, 3, 5, 6, 1, 2, 3};
  // "2 3" ends the text; its latest earlier match is followed by 5 6 1.
  EXPECT_EQ(lookup_continuation(t, 2, 3), (std::vector<int32_t>{5, 6, 1}));
  // "1 2 3" is longer and matches at the start: 4 9 2 follow it.
  EXPECT_EQ(lookup_continuation(t, 3, 3), (std::vector<int32_t>{4, 9, 2}));
  EXPECT_EQ(lookup_continuation(t, 3, 1), (std::vector<int32_t>{4}));
  EXPECT_TRUE(lookup_continuation(std::vector<int32_t>{1, 2, 3}, 3, 4).empty());
  EXPECT_TRUE(lookup_continuation(std::vector<int32_t>{}, 3, 4).empty());
}

// --- The engine ---------------------------------------------------------

using testing::load;
using testing::load_stories;
using testing::stories_path;

// A random-weight model with stories260K's vocabulary.
std::string synth_with_stories_vocab(const testing::TempDir& dir, const std::string& name,
                                     uint64_t seed, int32_t dim) {
  SynthOptions o;
  o.shape = {.name = name, .dim = dim, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .ffn_dim = dim * 3,
             .ctx_len = 512};
  o.seed = seed;
  o.vocab_from = stories_path();
  const std::string path = dir.file(name + ".gguf");
  const Status st = synth_model(o, path);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return path;
}

std::string quantized_stories(const testing::TempDir& dir) {
  auto in = GgufFile::open(stories_path());
  EXPECT_TRUE(in.ok());
  QuantizeOptions qo;
  qo.target = DType::Q4_0;
  ThreadPool pool(1);
  const std::string path = dir.file("stories-q4_0.gguf");
  auto r = quantize_gguf(*in, path, qo, pool, {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return path;
}

struct Spec {
  Model* draft = nullptr;
  int32_t lookup = 0;
};

// Runs every prompt as its own request, all submitted together; returns
// each one's generated tokens and fills the engine's metrics into `m`.
std::vector<std::vector<int32_t>> generate(Model& target, const Spec& spec,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const RequestParams& params, int32_t max_seqs,
                                           EngineMetrics* m = nullptr) {
  EngineConfig cfg;
  cfg.n_threads = 1;
  cfg.ctx = 256;
  cfg.scheduler.max_seqs = max_seqs;
  Engine engine(target, cfg);
  if (spec.draft || spec.lookup) {
    SpecConfig sc;
    sc.draft = spec.draft;
    sc.lookup = spec.lookup;
    sc.draft_max = 4;
    const Status st = engine.enable_speculation(sc);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  std::vector<std::vector<int32_t>> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestParams p = params;
    p.sampling.seed = params.sampling.seed + i;
    auto id = engine.submit(prompts[i], p, [&out, i](const TokenEvent& ev) {
      if (ev.token >= 0) out[i].push_back(ev.token);
    });
    EXPECT_TRUE(id.ok());
  }
  EXPECT_TRUE(engine.run_until_idle().ok());
  if (m) *m = engine.metrics();
  return out;
}

std::vector<std::vector<int32_t>> story_prompts(const Model& m) {
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"Once upon a time", "Lily and Ben went to the park. Lily said",
                           "The cat", "One day, a little bird"})
    prompts.push_back(m.tokenizer().encode(text, true));
  return prompts;
}

RequestParams greedy_params(int32_t n) {
  RequestParams p;
  p.sampling = SamplingParams::greedy();
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

TEST(SpeculativeEngine, GreedyOutputEqualsPlainDecodingOnStories) {
  testing::TempDir dir;
  auto target = load(stories_path());
  ASSERT_TRUE(target);
  auto self = load(stories_path());
  auto q4 = load(quantized_stories(dir));
  auto random = load(synth_with_stories_vocab(dir, "random-draft", 3, 32));
  ASSERT_TRUE(self && q4 && random);
  const auto prompts = story_prompts(*target);
  const RequestParams params = greedy_params(80);
  for (int32_t max_seqs : {1, 4}) {
    const auto plain = generate(*target, {}, prompts, params, max_seqs);
    for (auto [name, spec] : {std::pair{"self", Spec{self.get(), 0}}, {"q4_0", Spec{q4.get(), 0}},
                              {"random", Spec{random.get(), 0}}, {"lookup", Spec{nullptr, 3}}}) {
      EngineMetrics m;
      EXPECT_EQ(generate(*target, spec, prompts, params, max_seqs, &m), plain)
          << name << " draft, max_seqs " << max_seqs;
      EXPECT_GT(m.spec_verify_passes, 0) << name;
      if (std::string(name) == "self") {
        EXPECT_EQ(m.spec_accepted_tokens, m.spec_draft_tokens);
      }
    }
  }
}

TEST(SpeculativeEngine, GreedyOutputEqualsPlainDecodingOnRandomWeights) {
  testing::TempDir dir;
  auto target = load(synth_with_stories_vocab(dir, "random-target", 11, 64));
  auto draft = load(synth_with_stories_vocab(dir, "random-draft", 12, 32));
  ASSERT_TRUE(target && draft);
  const auto prompts = story_prompts(*target);
  const RequestParams params = greedy_params(60);
  for (int32_t max_seqs : {1, 4}) {
    const auto plain = generate(*target, {}, prompts, params, max_seqs);
    EXPECT_EQ(generate(*target, {draft.get(), 0}, prompts, params, max_seqs), plain) << max_seqs;
    EXPECT_EQ(generate(*target, {nullptr, 2}, prompts, params, max_seqs), plain) << max_seqs;
  }
}

// Sampled output: over many seeds, the tokens made by verification steps
// (the 2nd to 4th) have the same distribution with and without speculation.
TEST(SpeculativeEngine, SampledTokensHaveThePlainDistribution) {
  testing::TempDir dir;
  auto target = load(stories_path());
  auto draft = load(synth_with_stories_vocab(dir, "random-draft", 5, 32));
  auto q4 = load(quantized_stories(dir));
  ASSERT_TRUE(target && draft && q4);
  const std::vector<int32_t> prompt = target->tokenizer().encode("Once upon a time", true);
  constexpr int kSeeds = 1500;
  const std::vector<std::vector<int32_t>> prompts(kSeeds, prompt);
  RequestParams params;
  params.sampling.temperature = 1.0f;
  params.sampling.top_k = 0;
  params.sampling.top_p = 1.0f;
  params.sampling.min_p = 0.0f;
  params.sampling.seed = 1000;
  params.max_tokens = 4;
  params.ignore_eos = true;
  const auto plain = generate(*target, {}, prompts, params, 64);
  params.sampling.seed = 900000;  // independent of the plain run's seeds
  for (auto [name, spec] : {std::pair{"random", Spec{draft.get(), 0}}, {"q4_0", Spec{q4.get(), 0}},
                            {"lookup", Spec{nullptr, 1}}}) {
    EngineMetrics m;
    const auto spec_out = generate(*target, spec, prompts, params, 64, &m);
    EXPECT_GT(m.spec_draft_tokens, 0) << name;
    for (size_t pos = 1; pos < 4; ++pos) {
      std::map<int32_t, int> a, b;
      for (int i = 0; i < kSeeds; ++i) {
        ASSERT_EQ(plain[static_cast<size_t>(i)].size(), 4u);
        ASSERT_EQ(spec_out[static_cast<size_t>(i)].size(), 4u);
        ++a[plain[static_cast<size_t>(i)][pos]];
        ++b[spec_out[static_cast<size_t>(i)][pos]];
      }
      const auto [stat, df] = two_sample_chi_square(a, b);
      EXPECT_LT(stat, chi_square_critical(df)) << name << " token " << pos << " df " << df;
    }
  }
}

// Every request releases its draft blocks too: one after another, far more
// requests than the draft cache has room for all draft, and both pools end
// idle.
TEST(SpeculativeEngine, RequestsOneAfterAnotherAllDraftAndFreeBothPools) {
  auto target = load(stories_path());
  auto draft = load(stories_path());
  ASSERT_TRUE(target && draft);
  EngineConfig cfg;
  cfg.n_threads = 1;
  cfg.ctx = 128;
  cfg.scheduler.max_seqs = 2;
  Engine engine(*target, cfg);
  ASSERT_TRUE(engine.enable_speculation({draft.get(), 0, 4}).ok());
  const EngineMetrics idle = engine.metrics();
  const auto prompts = story_prompts(*target);
  for (int i = 0; i < 3 * cfg.scheduler.max_seqs; ++i) {
    int32_t drafted = -1;
    auto id = engine.submit(prompts[static_cast<size_t>(i) % prompts.size()], greedy_params(100),
                            [&](const TokenEvent& ev) { if (ev.finished) drafted = ev.timings->n_drafted; });
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(engine.run_until_idle().ok());
    EXPECT_GT(drafted, 0) << "request " << i;
  }
  const EngineMetrics m = engine.metrics();
  EXPECT_GT(m.draft_kv.total, 0);
  EXPECT_EQ(m.draft_kv.used, 0);
  EXPECT_EQ(m.kv.used, 0);
  EXPECT_EQ(m.draft_kv.free + m.draft_kv.cached, idle.draft_kv.free + idle.draft_kv.cached);
  EXPECT_EQ(m.kv.free + m.kv.cached, idle.kv.free + idle.kv.cached);
}

TEST(SpeculativeEngine, ADraftWithAnotherVocabularyIsRefused) {
  testing::TempDir dir;
  auto target = load(stories_path());
  SynthOptions o;
  o.shape = {.name = "other-vocab", .n_vocab = 600, .dim = 32, .n_layers = 1, .n_heads = 4, .n_kv_heads = 4,
             .ffn_dim = 96, .ctx_len = 128};
  ASSERT_TRUE(synth_model(o, dir.file("other.gguf")).ok());
  auto other = load(dir.file("other.gguf"));
  ASSERT_TRUE(target && other);
  Engine engine(*target, EngineConfig{});
  SpecConfig sc;
  sc.draft = other.get();
  const Status st = engine.enable_speculation(sc);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("vocabulary"), std::string::npos) << st.error().message;
  EXPECT_FALSE(engine.speculating());
}

}  // namespace
}  // namespace duet
