// `duet convert` end to end: the binary writes GGUF files that match
// llama.cpp's conversions, and bad invocations or inputs fail cleanly.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "formats/gguf.h"
#include "formats/llama_names.h"
#include "formats/vocab_expect.h"
#include "test_util.h"

namespace duet {
namespace {

using namespace testing;  // the paths, temp dirs and runner of test_util.h
namespace n = gguf_names;

CommandResult convert(const std::string& args) { return run_duet("convert " + args); }

// A llama2.c checkpoint with stories260K's tokenizer to `out`.
CommandResult convert_llama2c(const std::string& checkpoint, const std::string& out) {
  return convert("--from llama2c --model " + checkpoint + " --tokenizer " +
                 shared_path("models/stories260K/tok512.bin") + " -o " + out);
}

TEST(Convert, Llama2cStories260K) {
  TempDir dir;
  const std::string out = dir.file("stories.gguf");
  const auto r = convert_llama2c(shared_path("models/stories260K/stories260K.bin"), out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote"), std::string::npos) << r.output;

  auto ours = GgufFile::open(out);
  ASSERT_TRUE(ours.ok()) << ours.error().message;
  auto ref = GgufFile::open(stories_gguf());
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(*ours->get_string(n::kName), "stories260K");
  for (const TensorView& t : ref->tensors()) {
    const TensorView* o = ours->tensor(t.name == n::kOutput ? n::kTokenEmbd : t.name);
    ASSERT_NE(o, nullptr) << t.name;
    ASSERT_EQ(o->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << t.name;
  }
  EXPECT_EQ(*ours->get_strings(n::kTokTokens), *ref->get_strings(n::kTokTokens));
  EXPECT_EQ(*ours->get_ints(n::kTokTypes), *ref->get_ints(n::kTokTypes));
}

TEST(Convert, SpmVocabOnly) {
  TempDir dir;
  const std::string out = dir.file("vocab.gguf");
  const auto r = convert("--from spm --tokenizer " + shared_path("tokenizers/llama2/tokenizer.model") +
                         " --vocab-only --name llama2-vocab -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto ours = GgufFile::open(out);
  ASSERT_TRUE(ours.ok()) << ours.error().message;
  auto ref = GgufFile::open(shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(ref.ok());
  EXPECT_TRUE(ours->tensors().empty());
  EXPECT_EQ(*ours->get_string(n::kName), "llama2-vocab");
  EXPECT_EQ(*ours->get_string(n::kArchitecture), "llama");
  expect_same_llama_vocab(*ours, *ref);
}

// Export version 2 (Q8_0, group size 4) is dequantized to an F32 GGUF.
TEST(Convert, Llama2cQ8Checkpoint) {
  TempDir dir;
  const std::string out = dir.file("q8.gguf");
  const auto r = convert_llama2c(shared_path("models/stories260K/stories260K_q8.bin"), out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->tensors().size(), 47u);
  for (const TensorView& t : g->tensors()) EXPECT_EQ(t.dtype, DType::F32) << t.name;
  EXPECT_EQ(*g->get_uint(n::kFileType), 0u);
}

TEST(Convert, Llama2cTokenizerVocabOnly) {
  TempDir dir;
  const std::string out = dir.file("tok.gguf");
  const auto r = convert("--from llama2c --vocab-only --tokenizer " +
                         shared_path("models/aidreams260K/tok512.bin") + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g->tensors().empty());
  EXPECT_EQ(g->get_strings(n::kTokTokens)->size(), 512u);
  EXPECT_EQ(*g->get_string(n::kName), "tok512");
}

// A llama2.c checkpoint whose vocabulary comes as a SentencePiece .model:
// the Llama 2 model has 32000 pieces, stories260K 512, so it must refuse.
TEST(Convert, SpmWithCheckpointChecksVocabSize) {
  TempDir dir;
  const auto r = convert("--from spm --model " + shared_path("models/stories260K/stories260K.bin") +
                         " --tokenizer " + shared_path("tokenizers/llama2/tokenizer.model") + " -o " +
                         dir.file("x.gguf"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("32000"), std::string::npos) << r.output;
}

TEST(Convert, UsageErrors) {
  TempDir dir;
  const std::string out = " -o " + dir.file("x.gguf");
  const std::string tok = " --tokenizer " + shared_path("models/stories260K/tok512.bin");
  const std::string model = " --model " + shared_path("models/stories260K/stories260K.bin");
  struct Case {
    std::string args;
    const char* expect;
  };
  const Case cases[] = {
      {"--from onnx" + tok + out, "supported: llama2c, spm"},
      {"--from spm" + tok + out, "--vocab-only"},
      {"--from llama2c" + tok + out, "--model"},
      {"--from llama2c --vocab-only" + model + tok + out, "drop --model"},
      {"--from llama2c --model /nonexistent/x.bin" + tok + out, "/nonexistent/x.bin"},
      {"--from llama2c" + model + " --tokenizer " + shared_path("models/stories260K/stories260K.bin") + out,
       "tokenizer"},
      {"--from spm --vocab-only --tokenizer " + shared_path("models/stories260K/tok512.bin") + out,
       "protobuf"},
  };
  for (const Case& c : cases) {
    const auto r = convert(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(std::ifstream(dir.file("x.gguf")).good());
}

TEST(Convert, TruncatedCheckpointFailsCleanly) {
  TempDir dir;
  std::ifstream in(shared_path("models/stories260K/stories260K.bin"), std::ios::binary);
  std::string bytes(5000, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  write_file(dir.file("cut.bin"), bytes);
  const auto r = convert_llama2c(dir.file("cut.bin"), dir.file("x.gguf"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("should be 1056540 bytes, file has 5000"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace duet
