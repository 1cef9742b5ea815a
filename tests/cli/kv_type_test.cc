// --kv-type on the command line: what `duet run` reports for each type, a
// bad name refused before any model is loaded, and `duet perplexity` with a
// quantized cache staying near f32's.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/story_text.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::duet_binary;
using testing::run_command;

std::string stories() { return testing::shared_path("models/stories260K/stories260K.gguf"); }

// The JSON stats line `duet run --json` prints last on stderr.
nlohmann::json run_json(const std::string& kv_type) {
  // The generated text (stdout) is dropped; stderr comes through.
  const auto r = run_command("{ " + duet_binary() + " run -m " + stories() +
                             " -p 'Once upon a time' -n 24 --temp 0 -t 1 --ctx 512 --json --kv-type " +
                             kv_type + " 2>&1 >/dev/null; }");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t end = r.output.find_last_not_of('\n');
  const size_t start = r.output.rfind('\n', end);
  return nlohmann::json::parse(r.output.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
}

TEST(KvTypeCli, RunReportsTypeAndBytesPerToken) {
  auto m = Model::load(stories());
  ASSERT_TRUE(m.ok()) << m.error().message;
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8, KvType::Q4}) {
    const std::string name(kv_type_name(t));
    const nlohmann::json j = run_json(name);
    ASSERT_TRUE(j.is_object()) << name;
    EXPECT_EQ(j["kv_type"], name);
    EXPECT_EQ(j["kv_bytes_per_token"], KvCache::bytes_per_token((*m)->kv_shape(), t)) << name;
    EXPECT_EQ(j["generated_tokens"], 24) << name;
  }
}

TEST(KvTypeCli, UnknownTypeIsAClearError) {
  for (const std::string cmd : {"run -p hi", "perplexity -f /dev/null", "serve", "bench", "chat"}) {
    // A model path that does not exist: the option is checked first.
    const auto r = run_command(duet_binary() + " " + cmd + " -m /nonexistent.gguf --kv-type q5");
    EXPECT_NE(r.exit_code, 0) << cmd;
    EXPECT_NE(r.output.find("unknown KV cache type 'q5' (expected f32, f16, q8 or q4)"), std::string::npos)
        << cmd << ": " << r.output;
  }
}

TEST(KvTypeCli, ServeRefusesKvMemWithKvBlocks) {
  const auto r = run_command(duet_binary() + " serve -m " + stories() + " --kv-mem 4 --kv-blocks 8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--kv-mem or --kv-blocks, not both"), std::string::npos) << r.output;
}

double perplexity(const std::string& text_file, const std::string& kv_type) {
  const auto r = run_command("{ " + duet_binary() + " perplexity -m " + stories() + " -f " + text_file +
                             " --json -t 1 --kv-type " + kv_type + " 2>/dev/null; }");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j.value("kv_type", ""), kv_type);
  return j.value("perplexity", 0.0);
}

TEST(KvTypeCli, PerplexityCostOfEachType) {
  testing::TempDir dir;
  const std::string text = dir.file("story.txt");
  std::ofstream(text) << testing::kEvaluationStory;
  const double f32 = perplexity(text, "f32");
  const double f16 = perplexity(text, "f16");
  const double q8 = perplexity(text, "q8");
  const double q4 = perplexity(text, "q4");
  std::printf("[ perplexity, stories260K ] f32 %.4f  f16 %.4f  q8 %.4f  q4 %.4f\n", f32, f16, q8, q4);
  // Measured (docs/kv_cache.md): f32 3.4716, f16 3.4716, q8 3.4692, q4 7.8758.
  // Stated bounds relative to f32 KV: f16 0.1%, q8 1%; q4 on this model's
  // 8-wide heads costs much more, bounded at 3x.
  EXPECT_NEAR(f16 / f32, 1.0, 0.001);
  EXPECT_NEAR(q8 / f32, 1.0, 0.01);
  EXPECT_LT(q4 / f32, 3.0);
}

}  // namespace
}  // namespace duet
