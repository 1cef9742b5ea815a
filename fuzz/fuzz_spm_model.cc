// A SentencePiece tokenizer.model from untrusted bytes: the protobuf reader,
// the import into a GGUF "llama" vocabulary, and the tokenizer loaded from
// it encoding and decoding a text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "formats/gguf.h"
#include "formats/llama_import.h"
#include "formats/spm_model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto model = duet::parse_spm_model(bytes, "tokenizer.model");
  if (!model) return 0;
  auto vocab = duet::vocab_from_spm(*model, "tokenizer.model");
  if (!vocab) return 0;
  const duet::GgufWriter w = duet::vocab_only_gguf(*vocab, "fuzz");
  auto file = duet::GgufFile::assemble("tokenizer.model", w.metadata(), {}, nullptr);
  if (!file) return 0;
  auto tok = duet::Tokenizer::from_gguf(*file);
  if (!tok) return 0;
  const std::string text = " Hello  world\n<s> 123 ünï 🦙";
  for (bool special : {false, true}) {
    const auto ids = (*tok)->encode(text, /*add_bos=*/true, special);
    (void)(*tok)->decode(ids);
  }
  return 0;
}
