#include "tokenizer/tokenizer.h"

#include <string_view>

#include "formats/gguf.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"

namespace duet {
namespace {

// tokenizer.ggml.model -> the tokenizer that reads that vocabulary kind.
struct TokenizerKind {
  std::string_view model;
  Result<std::unique_ptr<Tokenizer>> (*load)(const GgufFile&);
};

constexpr TokenizerKind kKinds[] = {
    {"llama", &SpmTokenizer::from_gguf},
    {"gpt2", &BpeTokenizer::from_gguf},
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  DUET_ASSIGN(const std::string model, file.get_string("tokenizer.ggml.model"));
  std::string known;
  for (const TokenizerKind& k : kKinds) {
    if (k.model == model) return k.load(file);
    known += (known.empty() ? "" : ", ") + std::string(k.model);
  }
  return err(file.path(), ": tokenizer.ggml.model '", model,
             "' is not a supported tokenizer (supported: ", known, ")");
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  StreamDetokenizer stream(*this, /*first_is_start=*/true);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  out += stream.flush();
  return out;
}

}  // namespace duet
