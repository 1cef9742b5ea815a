// `duet inspect` on real, generated and broken files.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "formats/gguf.h"
#include "test_util.h"

namespace duet {
namespace {

namespace dt = duet::testing;

dt::CommandResult inspect(const std::string& path) {
  return dt::run_command(dt::duet_binary() + " inspect '" + path + "'");
}

CpuLevel parse_level(const std::string& name) {
  for (CpuLevel l : {CpuLevel::kScalar, CpuLevel::kAvx2, CpuLevel::kAvx512})
    if (cpu_level_name(l) == name) return l;
  ADD_FAILURE() << "no level " << name;
  return CpuLevel::kAvx512;
}

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Inspect, Stories260K) {
  const std::string path = dt::shared_path("models/stories260K/stories260K.gguf");
  const auto r = inspect(path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GGUF version: 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("general.architecture (string) = \"llama\""), std::string::npos);
  EXPECT_NE(r.output.find("tokenizer.ggml.tokens = [string x 512] \"<unk>\", \"<s>\""),
            std::string::npos);
  EXPECT_NE(r.output.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(r.output.find("blk.4.ffn_norm.weight"), std::string::npos);
  EXPECT_NE(r.output.find("total: 48 tensors"), std::string::npos);
}

TEST(Inspect, GeneratedFileShowsValuesShapesAndOffsets) {
  dt::TempDir dir;
  const std::string path = dir.file("gen.gguf");
  GgufWriter w;
  w.set("long", GgufValue::of_string(std::string(500, 'x') + "TAIL"));
  w.set("ids", GgufValue::of_i32s(std::vector<int32_t>(100, 7)));
  w.set("ratio", GgufValue::of_f64(0.125));
  std::string accents = "a";
  for (int i = 0; i < 40; ++i) accents += "\xC3\xA9";  // 'é': byte 64 falls inside one
  w.set("accents", GgufValue::of_string(accents));
  const std::vector<uint8_t> data(2 * 34 * 3);
  ASSERT_TRUE(w.add_tensor("weights.q8", DType::Q8_0, {64, 3}, data.data(), data.size()).ok());
  ASSERT_TRUE(w.add_tensor("bias", DType::F32, {5}, data.data(), 20).ok());
  ASSERT_TRUE(w.write(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  const std::string bias_offset = std::to_string(f->file_offset(*f->tensor("bias")));

  const auto r = inspect(path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("TAIL"), std::string::npos) << "long strings are cut";
  EXPECT_NE(r.output.find("(504 bytes)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ids = [i32 x 100] 7, 7,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ratio (f64) = 0.125"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("accents (string) = \"" + accents.substr(0, 63) + "\"... (81 bytes)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("64 x 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Q8_0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" " + bias_offset + "\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("total: 2 tensors, 197 elements, 224 bytes"), std::string::npos)
      << r.output;
}

TEST(Inspect, TruncatedFileIsOneClearError) {
  std::ifstream in(dt::shared_path("models/stories260K/stories260K.gguf"), std::ios::binary);
  std::vector<char> bytes(std::istreambuf_iterator<char>(in), {});
  ASSERT_GT(bytes.size(), 20000u);
  dt::TempDir dir;
  for (size_t cut : {size_t{3}, size_t{100}, size_t{5000}, bytes.size() - 1}) {
    const std::string path = dir.file("cut" + std::to_string(cut) + ".gguf");
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    const auto r = inspect(path);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.rfind("duet: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(path), std::string::npos) << r.output;
    EXPECT_EQ(count_lines(r.output), 1u) << r.output;
  }
}

TEST(Inspect, MissingFile) {
  const auto r = inspect("/nonexistent/model.gguf");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("duet: error: /nonexistent/model.gguf", 0), 0u) << r.output;
  EXPECT_EQ(count_lines(r.output), 1u) << r.output;
}

// The kernel table's rows (op, type, level, implementation) of
// `duet inspect --kernels`, run with `env` before it.
struct KernelRow {
  std::string op, type, level;
};
std::vector<KernelRow> kernel_rows(const std::string& env, std::string* output) {
  const auto r = dt::run_command(env + " " + dt::duet_binary() + " inspect --kernels");
  *output = r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<KernelRow> rows;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) != 0 || line.find("implementation") != std::string::npos) continue;
    KernelRow row;
    std::istringstream(line) >> row.op >> row.type >> row.level;
    rows.push_back(row);
  }
  return rows;
}

bool has_row(const std::vector<KernelRow>& rows, const std::string& op, const std::string& type) {
  return std::any_of(rows.begin(), rows.end(), [&](const KernelRow& r) { return r.op == op && r.type == type; });
}

TEST(Inspect, KernelsListWhatThisCpuRuns) {
  std::string out;
  // The level this process runs at: the child inherits any DUET_CPU.
  const CpuLevel level = active_cpu_level();
  const auto rows = kernel_rows("", &out);
  EXPECT_NE(out.find("cpu level: " + std::string(cpu_level_name(level))), std::string::npos) << out;
  for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q5_1",
                           "IQ4_NL", "Q2_K", "Q3_K", "IQ4_XS", "TQ1_0", "TQ2_0"})
    EXPECT_TRUE(has_row(rows, "dot", type)) << type << "\n" << out;
  for (const char* type : {"f32", "f16", "q8", "q4"}) EXPECT_TRUE(has_row(rows, "kv_rows", type)) << out;
  for (const char* op : {"exp", "swiglu", "probes"}) EXPECT_TRUE(has_row(rows, op, "-")) << out;
  EXPECT_EQ(has_row(rows, "packed_gemm", "Q8_0"), level >= CpuLevel::kAvx2) << out;  // packed from AVX2 up
  for (const KernelRow& r : rows) EXPECT_LE(parse_level(r.level), level) << r.op << " " << r.type;
}

TEST(Inspect, KernelsFollowDuetCpu) {
  std::string out;
  const auto rows = kernel_rows("DUET_CPU=scalar", &out);
  EXPECT_NE(out.find("cpu level: scalar"), std::string::npos) << out;
  ASSERT_TRUE(has_row(rows, "dot", "Q8_0") && has_row(rows, "swiglu", "-")) << out;
  for (const KernelRow& r : rows) EXPECT_EQ(r.level, "scalar") << r.op << " " << r.type;
  EXPECT_FALSE(has_row(rows, "packed_gemm", "Q8_0"));
}

TEST(Inspect, NeedsAFileOrKernels) {
  const auto r = dt::run_command(dt::duet_binary() + " inspect");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--kernels"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace duet
