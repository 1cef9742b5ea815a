// The tokenizer tests' shared steps: a vocabulary loaded from a GGUF file,
// and ids printed for a failure message.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace duet::testing {

// The tokenizer of the GGUF file at `path`, or null after a test failure.
inline std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return nullptr;
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// Llama 2's SentencePiece vocabulary as llama.cpp converted it, loaded once.
inline const Tokenizer& llama_spm() {
  static const std::unique_ptr<Tokenizer> t =
      load_tokenizer(shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  return *t;
}

// " 1 2 3" for {1, 2, 3}.
inline std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace duet::testing
