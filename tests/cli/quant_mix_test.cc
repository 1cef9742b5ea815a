// Every model of ../shared/models/quant-ref (llama-quantize's files: one
// type each for tiny256, the usual mixes with their row fallbacks for
// tiny384) loads and generates, and its logits agree with those of the same
// weights dequantized to F32 (the bit-exact dequantizers and the F32 kernels:
// what is left is the activations' 8-bit quantization) and, loosely, with the
// F32 model they were quantized from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/prompt_logits.h"
#include "test_util.h"

namespace duet {
namespace {

using namespace testing;

std::string ref_dir() { return shared_path("models/quant-ref"); }

// The quantized files, by name; the F32 sources are what they came from.
std::vector<std::string> quantized_models() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(ref_dir())) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".gguf") && !name.ends_with("-f32.gguf")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<float> logits_of(const std::string& model, const TempDir& dir) {
  return prompt_logits(model, "Once upon a time there was a little girl", dir);
}

TEST(QuantMix, EveryFileGenerates32Tokens) {
  const auto models = quantized_models();
  ASSERT_GE(models.size(), 22u);
  for (const std::string& name : models) {
    const auto r = run_duet("run -t 2 -m " + ref_dir() + "/" + name +
                            " -p 'Once upon a time' -n 32 --temp 0 --ignore-eos");
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_NE(r.output.find("generated tokens: 32"), std::string::npos) << name << "\n" << r.output;
  }
}

// Measured relative RMS against the dequantized model: 0.8-1.4 % (a wrong
// scale or offset in a kernel gives tens of %); against the F32 source,
// 1.5-13 % for the tiny384 mixes and far more for tiny256 in TQ1_0 or Q2_K
// throughout (random weights do not survive ternary rounding), so that
// comparison is made for the mixes only.
TEST(QuantMix, LogitsAgreeWithTheDequantizedModel) {
  TempDir dir;
  for (const std::string& name : quantized_models()) {
    const std::string model = ref_dir() + "/" + name, f32 = dir.file("dequantized.gguf");
    const auto q = run_duet("quantize -t 2 " + model + " " + f32 + " f32");
    ASSERT_EQ(q.exit_code, 0) << q.output;
    const std::vector<float> got = logits_of(model, dir), want = logits_of(f32, dir);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(got.empty());
    const double vs_dequantized = relative_rms(got, want);
    EXPECT_LT(vs_dequantized, 0.05) << name;
    std::string line = name + ": vs dequantized " + std::to_string(vs_dequantized);
    if (name.starts_with("tiny384-")) {
      const double vs_source = relative_rms(got, logits_of(ref_dir() + "/tiny384-f32.gguf", dir));
      EXPECT_LT(vs_source, 0.2) << name;
      line += ", vs f32 source " + std::to_string(vs_source);
    }
    std::printf("  %s\n", line.c_str());
  }
}

}  // namespace
}  // namespace duet
