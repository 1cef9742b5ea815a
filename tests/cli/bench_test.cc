// duet bench --roofline on stories260K: every repetition carries the probes
// taken beside it, and the reported percentage is the mean of the
// repetitions' own ratios.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace duet {
namespace {

using testing::duet_binary;
using testing::run_command;

TEST(BenchCli, RooflinePairsEveryRepetitionWithItsProbes) {
  const std::string model = testing::shared_path("models/stories260K/stories260K.gguf");
  const auto r = run_command(duet_binary() + " bench -m " + model + " -p 32 -n 8 -r 2 -t 1 --roofline --probe-mib 64 --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output.substr(r.output.find('[')), nullptr, false);
  ASSERT_TRUE(rows.is_array()) << r.output;
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    const bool decode = row["test"] == "tg8";
    EXPECT_EQ(row["test"], decode ? "tg8" : "pp32");
    const auto& tps = row["samples_tok_s"];
    const auto& ceilings = row["samples_ceiling"];
    ASSERT_EQ(tps.size(), 2u);
    ASSERT_EQ(ceilings.size(), 2u);
    ASSERT_EQ(row["roofline"].size(), 2u);
    const double per_tok = row["achieved"].get<double>() / row["tok_s"].get<double>();
    double pct = 0;
    for (size_t i = 0; i < 2; ++i) {
      const double c = ceilings[i];
      EXPECT_EQ(c, row["roofline"][i][decode ? "read_gb_s" : "fma_gflop_s"].get<double>());
      ASSERT_GT(c, 0);
      pct += 100.0 * tps[i].get<double>() * per_tok / c / 2;
    }
    EXPECT_NEAR(row["percent_of_ceiling"].get<double>(), pct, 1e-6 * pct);
    EXPECT_NEAR(row["ceiling"].get<double>(), (ceilings[0].get<double>() + ceilings[1].get<double>()) / 2, 1e-9);
  }
}


// --json-schema adds a row comparing decode with and without the schema's
// grammar, with the engine's own grammar time per token.
TEST(BenchCli, JsonSchemaRowComparesConstrainedDecode) {
  const std::string model = testing::shared_path("models/stories260K/stories260K.gguf");
  const std::string schema = ::testing::TempDir() + "/bench_schema.json";
  testing::write_file(schema, R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"number"}}},"required":["a","b"]})");
  const auto r = run_command(duet_binary() + " bench -m " + model + " -p 0 -n 12 -r 2 -t 1 --json-schema " + schema + " --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output.substr(r.output.find('[')), nullptr, false);
  ASSERT_TRUE(rows.is_array()) << r.output;
  ASSERT_EQ(rows.size(), 2u) << r.output;
  const auto& g = rows[1];
  EXPECT_EQ(g["test"], "grammar");
  ASSERT_EQ(g["samples_ratio"].size(), 2u);
  ASSERT_EQ(g["samples_grammar_ms"].size(), 2u);
  EXPECT_GT(g["itl_ms"].get<double>(), 0);
  EXPECT_NEAR(g["ratio"].get<double>(),
              (g["samples_ratio"][0].get<double>() + g["samples_ratio"][1].get<double>()) / 2, 1e-9);
  const double r0 = g["samples_ratio"][0], r1 = g["samples_ratio"][1];
  EXPECT_NEAR(g["ratio_median"].get<double>(), (r0 + r1) / 2, 1e-9);  // two pairs: their middle
  EXPECT_GT(g["grammar_ms_per_token"].get<double>(), 0);
  EXPECT_GE(g["n_tokens"][0].get<int>(), 2);
  EXPECT_GE(g["compile_ms"].get<double>(), 0);
}

TEST(BenchCli, JsonSchemaBadInputIsNamed) {
  const std::string model = testing::shared_path("models/stories260K/stories260K.gguf");
  const std::string schema = ::testing::TempDir() + "/bench_bad_schema.json";
  testing::write_file(schema, R"({"type":"object","properties":{"a":{"type":"strin"}}})");
  auto r = run_command(duet_binary() + " bench -m " + model + " -p 0 -n 8 -r 1 --json-schema " + schema + " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--json-schema"), std::string::npos) << r.output;
  r = run_command(duet_binary() + " bench -m " + model + " -p 0 -n 1 -r 1 --grammar 'root ::= \"a\"' 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("-n 2 or more"), std::string::npos) << r.output;
}

// Every row carries the resident memory measured after the runs beside what
// the model and its KV cache should take.
TEST(BenchCli, ReportsResidentMemoryBesideTheExpected) {
  const std::string model = testing::shared_path("models/stories260K/stories260K.gguf");
  const auto r = run_command(duet_binary() + " bench -m " + model + " -p 16 -n 4 -r 1 -t 1 --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = nlohmann::json::parse(r.output.substr(r.output.find('[')), nullptr, false);
  ASSERT_TRUE(rows.is_array() && rows.size() == 2) << r.output;
  const auto& mem = rows[0]["memory"];
  ASSERT_TRUE(mem.is_object()) << rows[0].dump();
  EXPECT_EQ(mem, rows[1]["memory"]);  // one load, measured once
  const auto b = [&](const char* k) { return mem[k].get<double>(); };
  EXPECT_GT(b("weight_bytes"), 0);
  EXPECT_GT(b("kv_bytes"), 0);
  EXPECT_LE(b("packed_replaced_bytes"), b("weight_bytes"));
  EXPECT_EQ(b("expected_bytes"), b("weight_bytes") - b("packed_replaced_bytes") + b("packed_bytes") + b("kv_bytes"));
  EXPECT_GT(b("rss_bytes"), 0);
  EXPECT_GE(b("rss_bytes"), b("rss_anon_bytes"));
  EXPECT_GE(b("rss_bytes"), b("rss_file_bytes"));
  EXPECT_NEAR(b("rss_over_expected"), b("rss_bytes") / b("expected_bytes"), 1e-9 * b("rss_over_expected"));
}

}  // namespace
}  // namespace duet
