// A BF16 model's logits with the AVX-512 BF16 prefill path on and off
// (DUET_BF16_DOT): prefill of more than 12 tokens moves by bf16 rounding of
// the activations only, and shorter prompts (the fma kernels either way)
// keep their bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "test_util.h"

namespace duet {
namespace {

namespace dt = duet::testing;

std::vector<float> logits(const std::string& model, const std::string& tokens, const std::string& out, bool dot) {
  const auto r = dt::run_command(std::string("DUET_BF16_DOT=") + (dot ? "1" : "0") + " " + dt::duet_binary() +
                                 " logits -t 2 -m '" + model + "' --tokens '" + tokens + "' -o '" + out + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string bytes = dt::read_file(out);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::string token_list(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::to_string((i * 37) % 500 + 3) + " ";
  return s;
}

TEST(Bf16Dot, LogitsOnAndOffAgreeWithinBf16Rounding) {
  if (!cpu_features().avx512bf16 || active_cpu_level() < CpuLevel::kAvx512)
    GTEST_SKIP() << "no AVX512_BF16 at the active level";
  dt::TempDir dir;
  const std::string model = dir.file("bf16.gguf");
  const auto synth = dt::run_duet("synth --arch llama --dim 128 --ffn 256 --layers 2 --heads 4 --ctx 128 --dtype bf16 "
                                  "--vocab '" + dt::stories_gguf() + "' -o '" + model + "'");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;

  const int n = 40, vocab = 512;
  const auto off = logits(model, token_list(n), dir.file("off.bin"), false);
  const auto on = logits(model, token_list(n), dir.file("on.bin"), true);
  ASSERT_EQ(off.size(), static_cast<size_t>(n * vocab));
  ASSERT_EQ(on.size(), off.size());
  double max_diff = 0, sq = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(on[i] - off[i])));
    sq += static_cast<double>(off[i]) * off[i];
  }
  const double sd = std::sqrt(sq / static_cast<double>(off.size()));
  // The path ran (bf16 activations change the sums), and moved the logits by
  // a few bf16 roundings of their scale (seen: 0.009 at s.d. 1.0).
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 0.05 * sd) << "s.d. " << sd;
  // The greedy token wherever the runner-up is further than the difference
  // could move either.
  for (int p = 0; p < n; ++p) {
    const float* a = off.data() + static_cast<size_t>(p) * vocab;
    const float* b = on.data() + static_cast<size_t>(p) * vocab;
    std::vector<float> row(a, a + vocab);
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
    if (row[0] - row[1] <= 2 * max_diff) continue;
    EXPECT_EQ(std::max_element(a, a + vocab) - a, std::max_element(b, b + vocab) - b) << "position " << p;
  }

  // 12 tokens: the fma kernels on both sides, the same bits.
  const auto short_off = logits(model, token_list(12), dir.file("short_off.bin"), false);
  const auto short_on = logits(model, token_list(12), dir.file("short_on.bin"), true);
  ASSERT_EQ(short_on.size(), short_off.size());
  EXPECT_EQ(std::memcmp(short_on.data(), short_off.data(), short_on.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace duet
