// llama.cpp's own tokenizer suite: every ggml-vocab-*.gguf in
// ../shared/tokenizers/llama.cpp-vocab/ (SentencePiece and byte-level BPE
// alike) must encode each string of its .inp file to exactly the ids of its
// .out file, without BOS, as llama.cpp's test-tokenizer-0 checks them. The
// folder is listed rather than named file by file, so a vocabulary added
// there that duet cannot load or tokenize fails this test instead of being
// skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/llama_cpp_vectors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace duet {
namespace {

std::vector<std::string> vocab_files() {
  std::vector<std::string> files;
  std::error_code ec;
  const std::string dir = testing::shared_path("tokenizers/llama.cpp-vocab");
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("ggml-vocab-") && name.ends_with(".gguf")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

using testing::show;

// The number of strings of `path`'s vectors that encode exactly; each miss
// is reported.
size_t check_vocab(const std::string& path, size_t& n_strings) {
  const std::string name = std::filesystem::path(path).filename().string();
  Result<GgufFile> file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << name << ": " << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return 0;
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok()) << name << ": " << (tok.ok() ? "" : tok.error().message);
  const auto vectors = testing::read_llama_cpp_vectors(path);
  EXPECT_TRUE(vectors.ok()) << name << ": " << (vectors.ok() ? "" : vectors.error().message);
  if (!tok.ok() || !vectors.ok()) return 0;
  n_strings = vectors->size();
  size_t passed = 0;
  for (size_t n = 0; n < vectors->size(); ++n) {
    const testing::VocabVector& v = (*vectors)[n];
    const std::string got = show((*tok)->encode(v.text, false));
    EXPECT_EQ(got, show(v.ids)) << name << " string " << n << ": '" << v.text << "'";
    passed += got == show(v.ids);
  }
  return passed;
}

TEST(LlamaCppVocab, EveryVocabularyReproducesItsVectors) {
  const std::vector<std::string> files = vocab_files();
  // PROVENANCE.md lists 12; fewer means the folder is missing or incomplete.
  ASSERT_GE(files.size(), 12u) << "vocabularies found under " << testing::shared_path("tokenizers/llama.cpp-vocab");
  for (const std::string& path : files) {
    size_t n_strings = 0;
    const size_t passed = check_vocab(path, n_strings);
    // Every file carries test strings (46 or more); none may be empty.
    EXPECT_GE(n_strings, 40u) << path;
    std::printf("%-36s %zu/%zu\n", std::filesystem::path(path).filename().c_str(), passed, n_strings);
  }
}

}  // namespace
}  // namespace duet
