// Logits of a text prompt through `duet logits`, and how far two such sets
// differ: the CLI tests' measure of what a quantization costs.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace duet::testing {

inline std::vector<float> prompt_logits(const std::string& model, const std::string& prompt, const TempDir& dir) {
  const std::string out = dir.file("logits.bin");
  const auto r = run_duet("logits -t 1 -m " + model + " -p '" + prompt + "' -o " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string bytes = read_file(out);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// RMS of a - b over RMS of b.
inline double relative_rms(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    ref += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / ref);
}

}  // namespace duet::testing
