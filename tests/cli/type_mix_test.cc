// `duet inspect` and `duet run` (text and --json) name the architecture and
// the quant-type mix of a llama-quantize mix file: tensors and bytes per
// type, counted here from the file's own tensor table.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "formats/gguf.h"
#include "test_util.h"

namespace duet {
namespace {

using namespace testing;

struct Count {
  int64_t tensors = 0;
  uint64_t bytes = 0;
};

std::map<std::string, Count> count_types(const std::string& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok());
  std::map<std::string, Count> counts;
  if (!f.ok()) return counts;
  for (const TensorView& t : f->tensors()) {
    Count& c = counts[std::string(dtype_name(t.dtype))];
    ++c.tensors;
    c.bytes += t.nbytes;
  }
  return counts;
}

std::string mix_file() { return shared_path("models/quant-ref/tiny384-Q4_K_M.gguf"); }

TEST(TypeMix, InspectNamesArchitectureAndEveryType) {
  const auto r = run_duet("inspect " + mix_file());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("architecture: llama\n"), std::string::npos) << r.output;
  const auto counts = count_types(mix_file());
  ASSERT_GE(counts.size(), 4u);  // Q5_0, Q6_K, Q8_0 and F32 in this mix
  for (const auto& [type, c] : counts) {
    char want[128];
    std::snprintf(want, sizeof want, "  %-6s  %5lld tensors  %12llu bytes", type.c_str(),
                  static_cast<long long>(c.tensors), static_cast<unsigned long long>(c.bytes));
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  }
}

TEST(TypeMix, RunPrintsArchitectureAndMixAtLoad) {
  const auto r = run_command("{ " + duet_binary() + " run -t 1 -m " + mix_file() +
                             " -p 'Once upon a time' -n 2 --temp 0 2>&1 >/dev/null; }");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("model: llama, ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  for (const auto& [type, c] : count_types(mix_file())) {
    const std::string want = type + " " + std::to_string(c.tensors) + (c.tensors == 1 ? " tensor " : " tensors ");
    EXPECT_NE(line.find(want), std::string::npos) << want << "\n" << line;
  }
}

// With --json, stderr is one JSON object: the same facts are fields of it.
TEST(TypeMix, RunJsonCarriesArchitectureAndMix) {
  const auto r = run_command("{ " + duet_binary() + " run -t 1 --json -m " + mix_file() +
                             " -p 'Once upon a time' -n 2 --temp 0 2>&1 >/dev/null; }");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["architecture"], "llama");
  const auto counts = count_types(mix_file());
  ASSERT_EQ(j["type_mix"].size(), counts.size()) << r.output;
  for (const auto& m : j["type_mix"]) {
    const auto it = counts.find(m["type"].get<std::string>());
    ASSERT_NE(it, counts.end()) << m;
    EXPECT_EQ(m["tensors"].get<int64_t>(), it->second.tensors);
    EXPECT_EQ(m["bytes"].get<uint64_t>(), it->second.bytes);
  }
}

}  // namespace
}  // namespace duet
