// A Hugging Face tokenizer.json (and optionally tokenizer_config.json) from
// untrusted text, imported as `duet convert` does into GGUF tokenizer
// metadata, then loaded as a tokenizer that encodes and decodes a text.
// Input: tokenizer.json, then optionally a NUL byte and tokenizer_config.json.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "formats/gguf.h"
#include "formats/hf_tokenizer_import.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  duet::HfTokenizerFiles files;
  files.tokenizer_json = "tokenizer.json";
  if (nul != std::string_view::npos) files.tokenizer_config = "tokenizer_config.json";
  files.bos_id = 1;
  files.eos_id = 2;
  duet::GgufWriter w;
  const std::string_view config = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  if (!duet::set_hf_tokenizer_metadata_from_text(w, files, input.substr(0, nul), config)) return 0;

  auto vocab = duet::GgufFile::assemble("tokenizer.json", w.metadata(), {}, nullptr);
  if (!vocab) return 0;
  auto tok = duet::Tokenizer::from_gguf(*vocab);
  if (!tok) return 0;
  const std::string text = "Hello <|begin_of_text|> world\n\n 12345 ünï 🦙 it's";
  for (bool special : {false, true}) {
    const auto ids = (*tok)->encode(text, /*add_bos=*/true, special);
    (void)(*tok)->decode(ids);
  }
  return 0;
}
