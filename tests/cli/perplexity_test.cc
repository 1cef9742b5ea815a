// duet perplexity against values computed here from `duet logits` output: one
// window, strided windows (each window's new tokens scored from that
// window's own logits), and a model whose logits are all equal (perplexity =
// vocabulary size exactly).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/story_text.h"
#include "formats/gguf.h"
#include "formats/llama_names.h"
#include "formats/llama_synth.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace duet {
namespace {

using namespace testing;  // the paths, temp dirs and runner of test_util.h

nlohmann::json perplexity_json(const std::string& model, const std::string& text_file,
                               const std::string& extra) {
  // stderr is dropped so that stdout is exactly the JSON line; f32 KV as
  // `duet logits` computes, whose logits the scores are checked against.
  const auto r = run_command("{ " + duet_binary() + " perplexity -m " + model + " -f " + text_file +
                             " --json -t 1 --kv-type f32 " + extra + " 2>/dev/null; }");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output, nullptr, false);
}

std::vector<int32_t> tokenize(const std::string& model, const std::string& text) {
  auto file = GgufFile::open(model);
  EXPECT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok());
  return (*tok)->encode(text, (*tok)->add_bos_default());
}

// Logits [ids.size()][n_vocab] of one sequence, from `duet logits`.
std::vector<float> logits_of(const std::string& model, const std::vector<int32_t>& ids,
                             const TempDir& dir) {
  std::string list;
  for (int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const std::string out = dir.file("logits.bin");
  const auto r = run_command(duet_binary() + " logits -t 1 -m " + model + " --tokens " + list +
                             " -o " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(out, std::ios::binary);
  const std::vector<char> v((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> logits(v.size() / 4);
  std::memcpy(logits.data(), v.data(), logits.size() * 4);
  return logits;
}

// -log softmax(row)[target] in double.
double nll(const float* row, int n_vocab, int32_t target) {
  double max = row[0];
  for (int v = 1; v < n_vocab; ++v) max = std::max<double>(max, row[v]);
  double sum = 0;
  for (int v = 0; v < n_vocab; ++v) sum += std::exp(row[v] - max);
  return std::log(sum) + max - row[target];
}

TEST(Perplexity, OneWindowMatchesTheLogits) {
  TempDir dir;
  const std::string text = std::string(testing::kEvaluationStory).substr(0, 250);
  write_file(dir.file("eval.txt"), text);
  const std::vector<int32_t> ids = tokenize(stories_gguf(), text);
  ASSERT_GT(ids.size(), 60u);
  ASSERT_LE(ids.size(), 128u);  // one window of the model's context
  const std::vector<float> logits = logits_of(stories_gguf(), ids, dir);
  constexpr int kVocab = 512;
  ASSERT_EQ(logits.size(), ids.size() * kVocab);
  std::vector<double> nlls;
  for (size_t i = 0; i + 1 < ids.size(); ++i) nlls.push_back(nll(&logits[i * kVocab], kVocab, ids[i + 1]));
  const double count = static_cast<double>(nlls.size());
  double mean = 0, var = 0;
  for (double e : nlls) mean += e / count;
  for (double e : nlls) var += (e - mean) * (e - mean) / (count - 1);
  const double se = std::exp(mean) * std::sqrt(var / count);

  const nlohmann::json j = perplexity_json(stories_gguf(), dir.file("eval.txt"), "");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tokens"], ids.size() - 1);
  EXPECT_EQ(j["windows"], 1);
  EXPECT_EQ(j["ctx"], ids.size());
  EXPECT_NEAR(j["nll_mean"].get<double>(), mean, 1e-5);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(mean), 1e-4 * std::exp(mean));
  EXPECT_NEAR(j["std_error"].get<double>(), se, 1e-3 * se);
  // A trained model on its kind of text: far below the 512 of a uniform guess.
  EXPECT_LT(j["perplexity"].get<double>(), 30.0);
}

TEST(Perplexity, StridedWindowsScoreEachTokenOnceWithItsWindowsContext) {
  TempDir dir;
  const std::string text = testing::kEvaluationStory;
  write_file(dir.file("eval.txt"), text);
  const std::vector<int32_t> ids = tokenize(stories_gguf(), text);
  const int ctx = 40, stride = 15, n = static_cast<int>(ids.size());
  constexpr int kVocab = 512;
  double sum = 0;
  int64_t count = 0;
  int windows = 0;
  for (int begin = 0, scored = 1; scored < n; begin += stride, ++windows) {
    const int end = std::min(begin + ctx, n);
    const std::vector<int32_t> window(ids.begin() + begin, ids.begin() + end);
    const std::vector<float> logits = logits_of(stories_gguf(), window, dir);
    for (int t = std::max(scored, begin + 1); t < end; ++t, ++count)
      sum += nll(&logits[static_cast<size_t>(t - 1 - begin) * kVocab], kVocab, ids[t]);
    scored = end;
  }
  ASSERT_EQ(count, n - 1);
  const nlohmann::json j = perplexity_json(
      stories_gguf(), dir.file("eval.txt"),
      "--ctx " + std::to_string(ctx) + " --stride " + std::to_string(stride));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tokens"], count);
  EXPECT_EQ(j["windows"], windows);
  EXPECT_EQ(j["stride"], stride);
  EXPECT_NEAR(j["nll_mean"].get<double>(), sum / count, 1e-5);

  // Less context per token than in one window: a higher perplexity.
  const nlohmann::json whole = perplexity_json(stories_gguf(), dir.file("eval.txt"), "");
  EXPECT_GT(j["perplexity"].get<double>(), whole["perplexity"].get<double>());
}

TEST(Perplexity, EqualLogitsGiveTheVocabularySize) {
  // A synthetic model whose head is all zeros: every logit is 0, every token
  // has probability 1/n_vocab.
  TempDir dir;
  SynthOptions opt;
  opt.shape = {.name = "flat", .n_vocab = 0, .dim = 32, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
               .ffn_dim = 64, .ctx_len = 64};
  opt.vocab_from = stories_gguf();
  ASSERT_TRUE(synth_model(opt, dir.file("synth.gguf")).ok());
  auto synth = GgufFile::open(dir.file("synth.gguf"));
  ASSERT_TRUE(synth.ok());
  GgufWriter w;
  for (const std::string& k : synth->keys()) w.set(k, *synth->find(k));
  for (const TensorView& t : synth->tensors()) {
    std::vector<uint8_t> bytes(static_cast<const uint8_t*>(t.data),
                               static_cast<const uint8_t*>(t.data) + t.nbytes);
    if (t.name == gguf_names::kOutput) std::fill(bytes.begin(), bytes.end(), 0);
    ASSERT_TRUE(w.add_tensor(t.name, t.dtype, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                             bytes.data(), bytes.size()).ok());
  }
  ASSERT_TRUE(w.write(dir.file("flat.gguf")).ok());
  write_file(dir.file("eval.txt"), testing::kEvaluationStory);
  const nlohmann::json j = perplexity_json(dir.file("flat.gguf"), dir.file("eval.txt"), "--ctx 64");
  ASSERT_TRUE(j.is_object());
  EXPECT_NEAR(j["perplexity"].get<double>(), 512.0, 1e-6 * 512);
  EXPECT_NEAR(j["std_error"].get<double>(), 0.0, 1e-6);
  EXPECT_EQ(j["stride"], 32);
}

TEST(Perplexity, BadArguments) {
  TempDir dir;
  write_file(dir.file("eval.txt"), testing::kEvaluationStory);
  write_file(dir.file("short.txt"), "");
  const std::string base = duet_binary() + " perplexity -m " + stories_gguf();
  auto r = run_command(base + " -f " + dir.file("eval.txt") + " --ctx 32 --stride 32");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--stride 32"), std::string::npos) << r.output;
  r = run_command(base + " -f " + dir.file("eval.txt") + " --ctx 4096");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("context length 128"), std::string::npos) << r.output;
  r = run_command(base + " -f " + dir.file("missing.txt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.txt"), std::string::npos) << r.output;
  r = run_command(base + " -f " + dir.file("short.txt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("fewer than 2 tokens"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace duet
