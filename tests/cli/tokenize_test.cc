// `duet tokenize`: ids, pieces, text from files and stdin, --jsonl, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "formats/gguf.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::run_command;
using testing::write_file;

std::string duet_tokenize(const std::string& args) {
  return testing::duet_binary() + " tokenize -m " +
         testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf") + " " + args;
}

TEST(TokenizeCommand, PrintsIds) {
  auto r = run_command(duet_tokenize("'Hello world'"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "1 15043 3186\n");
  r = run_command(duet_tokenize("--no-bos 'Hello world'"));
  EXPECT_EQ(r.output, "15043 3186\n");
  r = run_command(duet_tokenize("''"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "1\n");
}

TEST(TokenizeCommand, Pieces) {
  const auto r = run_command(duet_tokenize("--pieces 'Hi\n'"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "1 '<s>'\n6324 '\xE2\x96\x81Hi'\n13 '<0x0A>'\n");
}

TEST(TokenizeCommand, ParseSpecial) {
  EXPECT_EQ(run_command(duet_tokenize("--no-bos --parse-special '<s>hello</s>'")).output, "1 22172 2\n");
  EXPECT_EQ(run_command(duet_tokenize("--no-bos '</s>'")).output, "1533 29879 29958\n");
}

TEST(TokenizeCommand, ReadsFilesAndStdin) {
  testing::TempDir dir;
  write_file(dir.file("in.txt"), "Hello world\n");
  auto r = run_command(duet_tokenize("-f " + dir.file("in.txt")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "1 15043 3186 13\n");
  r = run_command("printf 'Hello world' | " + duet_tokenize("--no-bos -f -"));
  EXPECT_EQ(r.output, "15043 3186\n");
}

TEST(TokenizeCommand, JsonLines) {
  testing::TempDir dir;
  write_file(dir.file("in.jsonl"), "\"Hello world\"\n\"\"\n\"a\\nb \\ud83e\\udd99\"\n");
  const auto r = run_command(duet_tokenize("--jsonl --no-bos -f " + dir.file("in.jsonl")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "{\"ids\":[15043,3186],\"text\":\"Hello world\"}\n"
            "{\"ids\":[],\"text\":\"\"}\n"
            "{\"ids\":[263,13,29890,29871,243,162,169,156],\"text\":\"a\\nb \xF0\x9F\xA6\x99\"}\n");
}

TEST(TokenizeCommand, Errors) {
  testing::TempDir dir;
  write_file(dir.file("bad.jsonl"), "\"ok\"\nnot json\n");
  auto r = run_command(duet_tokenize("--jsonl -f " + dir.file("bad.jsonl")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("line 2 is not a JSON string"), std::string::npos) << r.output;

  r = run_command(duet_tokenize(""));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no text"), std::string::npos) << r.output;

  r = run_command(duet_tokenize("hi -f " + dir.file("bad.jsonl")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not both"), std::string::npos) << r.output;

  r = run_command(duet_tokenize("-f " + dir.file("missing.txt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.txt"), std::string::npos) << r.output;

  GgufWriter w;
  w.set("tokenizer.ggml.model", GgufValue::of_string("wordpiece"));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"a"}));
  ASSERT_TRUE(w.write(dir.file("wp.gguf")).ok());
  r = run_command(testing::duet_binary() + " tokenize -m " + dir.file("wp.gguf") + " hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("tokenizer.ggml.model 'wordpiece'"), std::string::npos) << r.output;
}

// A Hugging Face tokenizer.json tokenizes like llama.cpp's GGUF of the same
// vocabulary (Llama 3), without any GGUF file. Only the framing differs: this
// tokenizer.json's post-processor adds no BOS, while a GGUF with the
// llama-bpe pre-tokenizer and no add_bos_token adds one, as in llama.cpp.
TEST(TokenizeCommand, TokenizerJsonMatchesTheGgufVocabulary) {
  const std::string json = duet::testing::shared_path("tokenizers/llama3/tokenizer.json");
  const std::string gguf = duet::testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-bpe.gguf");
  const auto framed = run_command(duet::testing::duet_binary() + " tokenize -m " + gguf + " Hi");
  EXPECT_EQ(framed.output, "128000 13347\n");
  // All texts in one run per tokenizer: loading the 9 MB tokenizer.json is
  // most of a run's time under the sanitizers.
  testing::TempDir dir;
  write_file(dir.file("in.jsonl"),
             "\"Hello world, how are you?\"\n\"  12345 tokens\\tand\\nlines\"\n"
             "\"\u00e9t\u00e9 \u4e16\u754c\"\n\"<|begin_of_text|>x\"\n");
  const auto a = run_command(duet::testing::duet_binary() + " tokenize --jsonl --tokenizer " + json + " -f " +
                             dir.file("in.jsonl"));
  const auto b = run_command(duet::testing::duet_binary() + " tokenize --jsonl --no-bos -m " + gguf + " -f " +
                             dir.file("in.jsonl"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(std::count(a.output.begin(), a.output.end(), '\n'), 4) << a.output;
  EXPECT_EQ(a.output.find("\"ids\":[]"), std::string::npos) << a.output;
  EXPECT_EQ(a.output, b.output);
  const auto both = run_command(duet::testing::duet_binary() + " tokenize --tokenizer " + json +
                                " -m " + gguf + " x");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("exactly one of"), std::string::npos) << both.output;
}

}  // namespace
}  // namespace duet
