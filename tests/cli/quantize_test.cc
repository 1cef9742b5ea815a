// `duet quantize` end to end on stories260K: the file re-reads as the
// reference quantizers write it, Q8_0 keeps the greedy text of F32, the 4-bit
// types stay within a perplexity bound, and bad invocations fail cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/story_text.h"
#include "formats/gguf.h"
#include "formats/llama_names.h"
#include "kernels/quant.h"
#include "quantize/rows.h"
#include "cli/prompt_logits.h"
#include "test_util.h"

namespace duet {
namespace {

using namespace testing;  // the paths, temp dirs and runner of test_util.h
namespace n = gguf_names;

CommandResult quantize(const std::string& args) { return run_duet("quantize -t 2 " + args); }

// Greedy text, stdout only.
std::string greedy(const std::string& model, int n_tokens) {
  const auto r = run_command("{ " + duet_binary() + " run -t 1 -m " + model +
                             " -p 'Once upon a time' --temp 0 --ignore-eos -n " +
                             std::to_string(n_tokens) + " 2>/dev/null; }");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

double perplexity(const std::string& model, const std::string& text_file) {
  const auto r = run_command("{ " + duet_binary() + " perplexity -t 2 --json -m " + model + " -f " +
                             text_file + " --ctx 128 --stride 64 2>/dev/null; }");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  return j.is_object() ? j["perplexity"].get<double>() : NAN;
}

// A quantize cut off mid-write (here by the file-size limit, whose signal
// ends the process as Ctrl-C would) leaves no file at all: not the
// destination, not its temporary.
TEST(QuantizeCli, AnInterruptedQuantizeLeavesNoFile) {
  TempDir dir;
  const std::string out = dir.file("q8.gguf");
  const auto r = run_command("bash -c 'ulimit -f 128; exec " + duet_binary() + " quantize -t 2 " + stories_gguf() +
                             " " + out + " q8_0'");
  EXPECT_EQ(r.exit_code, 128 + SIGXFSZ) << r.output;
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 0u);
}

// A kill -9 runs no handler: its temporary stays. The next write of the
// same destination removes it (its writer no longer runs), and leaves a
// running writer's alone.
TEST(QuantizeCli, AStalePartialOfAKilledWriterIsRemovedByTheNextWrite) {
  TempDir dir;
  const std::string out = dir.file("q8.gguf");
  const auto ended = run_command("bash -c 'echo $$'");
  const std::string stale = out + ".partial." + std::to_string(std::stol(ended.output));
  const std::string running = out + ".partial.1";  // init: always running
  for (const std::string& f : {stale, running}) std::ofstream(f) << "half a file";
  ASSERT_EQ(quantize(stories_gguf() + " " + out + " q8_0").exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(running));
  EXPECT_TRUE(std::filesystem::exists(out));
}

TEST(QuantizeCli, Q8_0FileRereadsAsQuantizeRowWrites) {
  TempDir dir;
  const std::string out = dir.file("q8.gguf");
  const auto r = quantize(stories_gguf() + " " + out + " q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("48 tensors"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << "a progress bar on a pipe: " << r.output;
  EXPECT_NE(r.output.find("bits per weight"), std::string::npos) << r.output;

  auto in = GgufFile::open(stories_gguf());
  auto q = GgufFile::open(out);
  ASSERT_TRUE(in.ok() && q.ok());
  for (const std::string& key : in->keys()) {
    ASSERT_NE(q->find(key), nullptr) << key;
    if (key == n::kFileType) continue;
    EXPECT_EQ(q->find(key)->type, in->find(key)->type) << key;
    EXPECT_EQ(q->find(key)->str, in->find(key)->str) << key;
    EXPECT_EQ(q->find(key)->u64, in->find(key)->u64) << key;
    EXPECT_EQ(q->find(key)->items.size(), in->find(key)->items.size()) << key;
  }
  EXPECT_EQ(*q->get_strings(n::kTokTokens), *in->get_strings(n::kTokTokens));
  EXPECT_EQ(*q->get_uint(n::kFileType), 7u);

  ASSERT_EQ(q->tensors().size(), in->tensors().size());
  int q8 = 0, f16 = 0;
  for (const TensorView& src : in->tensors()) {
    const TensorView* t = q->tensor(src.name);
    ASSERT_NE(t, nullptr) << src.name;
    if (src.n_dims == 1) {
      EXPECT_EQ(t->dtype, DType::F32) << src.name;
      ASSERT_EQ(t->nbytes, src.nbytes);
      EXPECT_EQ(std::memcmp(t->data, src.data, src.nbytes), 0) << src.name;
      continue;
    }
    const int64_t k = src.ne[0];
    // dim 64 fills Q8_0 blocks; hidden 172 does not and falls back to F16.
    EXPECT_EQ(t->dtype, k % 32 == 0 ? DType::Q8_0 : DType::F16) << src.name;
    (t->dtype == DType::Q8_0 ? q8 : f16)++;
    const size_t out_row = *row_bytes(t->dtype, k);
    ASSERT_EQ(t->nbytes, out_row * static_cast<size_t>(src.rows())) << src.name;
    std::vector<uint8_t> expect(out_row);
    for (int64_t row = 0; row < src.rows(); ++row) {
      const auto* x = reinterpret_cast<const float*>(src.row(row));
      if (t->dtype == DType::F16) {
        ASSERT_TRUE(row_from_float(DType::F16, x, expect.data(), k, nullptr).ok());
      } else {
        ASSERT_TRUE(quantize_row(DType::Q8_0, x, expect.data(), k).ok());
      }
      ASSERT_EQ(std::memcmp(t->row(row), expect.data(), out_row), 0) << src.name << " row " << row;
    }
  }
  EXPECT_EQ(f16, 5);  // one ffn_down per layer
  EXPECT_EQ(q8, 37 - 5);  // 37 matrices: 7 per layer, embedding, head
}

// 100 generated tokens after the 5 of the prompt. Measured: the texts part
// at about token 115 of the sequence, on a near-tie ("my ball" / "your
// ball"); karpathy's runq.c, with Q8_0 groups of 4, also parts from F32 after
// a few paragraphs.
TEST(QuantizeCli, Q8_0KeepsTheGreedyTextOfF32) {
  TempDir dir;
  ASSERT_EQ(quantize(stories_gguf() + " " + dir.file("q8.gguf") + " q8_0").exit_code, 0);
  const std::string f32 = greedy(stories_gguf(), 100);
  const std::string q8 = greedy(dir.file("q8.gguf"), 100);
  ASSERT_GT(f32.size(), 250u);  // 100 tokens of a 512-token vocabulary
  EXPECT_EQ(q8, f32);
}

// Bound on the 4-bit types, on hand-written TinyStories-style text (not
// sampled from the model): perplexity at most 25% above F32. Why 25%: on
// Llama-7B, llama.cpp's Q4_0 costs ~4% perplexity, but stories260K is 26000x
// smaller, with 64-wide rows where one 4-bit step is a large share of each
// weight, and its per-token losses are far less redundant; measured here,
// Q4_0 costs 5-7% and Q4_K (mostly its Q4_1 fallback here) 3-4%. The bound
// leaves room for rounding ties across CPU levels yet fails if a scale,
// offset or fallback type is wrong (a broken block scale sends perplexity to
// hundreds).
TEST(QuantizeCli, FourBitTypesStayWithinThePerplexityBound) {
  TempDir dir;
  write_file(dir.file("eval.txt"), testing::kEvaluationStory);
  write_file(dir.file("calib.txt"), testing::kCalibrationStory);
  const double base = perplexity(stories_gguf(), dir.file("eval.txt"));
  ASSERT_TRUE(std::isfinite(base));
  ASSERT_EQ(quantize(stories_gguf() + " " + dir.file("q8.gguf") + " q8_0").exit_code, 0);
  EXPECT_LT(std::fabs(perplexity(dir.file("q8.gguf"), dir.file("eval.txt")) / base - 1), 0.01);
  for (const std::string type : {"q4_0", "q4_k"}) {
    for (const std::string& calib : {std::string(), " --calibrate " + dir.file("calib.txt")}) {
      const std::string out = dir.file(type + ".gguf");
      const auto r = quantize(stories_gguf() + " " + out + " " + type + calib);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const double ppl = perplexity(out, dir.file("eval.txt"));
      std::printf("stories260K %s%s: perplexity %.4f (F32 %.4f, %+.2f%%)\n", type.c_str(),
                  calib.empty() ? "" : " calibrated", ppl, base, 100 * (ppl / base - 1));
      EXPECT_LT(ppl, 1.25 * base) << type << calib;
      EXPECT_GT(ppl, 0.95 * base) << type << calib;
    }
  }
}

std::vector<float> story_logits(const std::string& model, const TempDir& dir) {
  return prompt_logits(model, "Once upon a time there was a little girl named Lily who", dir);
}

// The mix types on tiny256 (rows of 256, 768: no fallbacks), against the
// files llama-quantize --pure wrote from the same F32 model: duet's logits
// must stay at least as close to the F32 model's. Measured (relative RMS,
// duet / llama.cpp): Q5_0 4.1/7.2 %, Q5_1 3.7/6.5 %, Q2_K 24/49 %, Q3_K
// 14/26 %, IQ4_NL 7.1/13 %, IQ4_XS 7.1/13 %, TQ1_0 and TQ2_0 69/114 %; duet
// is closer mostly because it keeps the embedding and head in Q8_0 where
// --pure quantizes them too. A broken quantizer lands far above.
TEST(QuantizeCli, MixTypesStayAsCloseToF32AsLlamaCppFiles) {
  TempDir dir;
  const std::string ref = shared_path("models/quant-ref");
  const std::vector<float> f32 = story_logits(ref + "/tiny256-f32.gguf", dir);
  for (const std::string type : {"Q5_0", "Q5_1", "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0"}) {
    const std::string out = dir.file(type + ".gguf");
    std::string lower = type;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto r = quantize(ref + "/tiny256-f32.gguf " + out + " " + lower);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(type + ": 14"), std::string::npos) << r.output;  // every block matrix
    const double ours = relative_rms(story_logits(out, dir), f32);
    const double theirs = relative_rms(story_logits(ref + "/tiny256-" + type + ".gguf", dir), f32);
    std::printf("tiny256 %s: logits %.2f%% from F32 (llama.cpp --pure %.2f%%)\n", type.c_str(), 100 * ours,
                100 * theirs);
    EXPECT_LT(ours, theirs) << type;
  }
}

TEST(QuantizeCli, KeepLeavesTensorsUnchanged) {
  TempDir dir;
  const std::string out = dir.file("q4.gguf");
  const auto r = quantize(stories_gguf() + " " + out + " q4_0 --keep 'blk.0.*' --keep 'attn_v'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto q = GgufFile::open(out);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->tensor("blk.0.attn_q.weight")->dtype, DType::F32);
  EXPECT_EQ(q->tensor("blk.3.attn_v.weight")->dtype, DType::F32);
  EXPECT_EQ(q->tensor("blk.3.attn_q.weight")->dtype, DType::Q4_0);
  EXPECT_EQ(q->tensor("blk.3.ffn_down.weight")->dtype, DType::F16);
  EXPECT_EQ(q->tensor(n::kTokenEmbd)->dtype, DType::Q8_0);
  EXPECT_EQ(q->tensor(n::kOutput)->dtype, DType::Q8_0);
  EXPECT_EQ(*q->get_uint(n::kFileType), 2u);
}

TEST(QuantizeCli, BadInvocations) {
  TempDir dir;
  auto r = quantize(stories_gguf() + " " + dir.file("x.gguf") + " iq3_s");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("iq3_s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("iq4_xs"), std::string::npos) << r.output;  // the list of types
  r = quantize(dir.file("missing.gguf") + " " + dir.file("x.gguf") + " q8_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.gguf"), std::string::npos) << r.output;
  r = quantize(stories_gguf() + " " + dir.file("x.gguf") + " q4_k --calibrate " + dir.file("none.txt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("none.txt"), std::string::npos) << r.output;
  EXPECT_FALSE(std::ifstream(dir.file("x.gguf")).good());
}

}  // namespace
}  // namespace duet
