// `duet inspect` on real, generated and broken files.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "formats/gguf.h"
#include "test_util.h"

namespace duet {
namespace {

namespace dt = duet::testing;

dt::CommandResult inspect(const std::string& path) {
  return dt::run_command(dt::duet_binary() + " inspect '" + path + "'");
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

}  // namespace
}  // namespace duet
