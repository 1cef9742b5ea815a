// llama.cpp's tokenizer test vectors: beside each ggml-vocab-*.gguf, a .inp
// file of texts, each followed by "\n__ggml_vocab_test__\n", and a .out file
// with one line of token ids per text.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace duet::testing {

struct VocabVector {
  std::string text;
  std::vector<int32_t> ids;
};

inline Result<std::vector<VocabVector>> read_llama_cpp_vectors(const std::string& gguf_path) {
  const std::string inp = read_file(gguf_path + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabVector> vectors;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) return err(gguf_path, ".inp: unterminated test string at byte ", pos);
    vectors.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream out(read_file(gguf_path + ".out"));
  for (VocabVector& v : vectors) {
    std::string line;
    if (!std::getline(out, line)) return err(gguf_path, ".out: no ids for '", v.text, "'");
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) v.ids.push_back(id);
  }
  return vectors;
}

}  // namespace duet::testing
