#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <initializer_list>
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

// The token id under the first of `keys` the file has, when it names a
// token of the vocabulary; -1 otherwise (converters write -1 for "none").
int32_t optional_token(const GgufFile& file, std::initializer_list<const char*> keys, int32_t n_vocab) {
  for (const char* key : keys) {
    const GgufValue* v = file.find(key);
    if (!v) continue;
    if (!v->is_integer()) return -1;
    const int64_t id = v->is_signed() ? v->i64 : static_cast<int64_t>(std::min<uint64_t>(v->u64, n_vocab));
    return id >= 0 && id < n_vocab ? static_cast<int32_t>(id) : -1;
  }
  return -1;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  DUET_ASSIGN(const std::string model, file.get_string("tokenizer.ggml.model"));
  std::string known;
  for (const TokenizerKind& k : kKinds) {
    if (k.model != model) continue;
    DUET_ASSIGN(std::unique_ptr<Tokenizer> t, k.load(file));
    t->fim_pre_id_ = optional_token(file, {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"}, t->n_vocab());
    t->fim_suf_id_ = optional_token(file, {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"}, t->n_vocab());
    t->fim_mid_id_ = optional_token(file, {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"}, t->n_vocab());
    return t;
  }
  for (const TokenizerKind& k : kKinds) {
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
