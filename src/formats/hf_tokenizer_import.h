// A Hugging Face tokenizer.json of the byte-level BPE families (GPT-2,
// Llama 3, Qwen2) as the tokenizer.ggml.* metadata of a GGUF "gpt2"
// vocabulary: tokens, token types, merges, the pre-tokenizer's llama.cpp name
// (told from the Split regex), special ids, add_bos_token and the chat
// template from tokenizer_config.json.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "formats/gguf.h"

namespace duet {

struct HfTokenizerFiles {
  std::string tokenizer_json;    // required
  std::string tokenizer_config;  // tokenizer_config.json; empty when the folder has none
  // config.json's ids, used when tokenizer_config.json names no BOS/EOS (-1: none).
  int64_t bos_id = -1;
  int64_t eos_id = -1;
};

// Sets the tokenizer keys on `w`. Errors name the file and the field: not
// BPE, not byte-level, an unknown pre-tokenizer regex, ids out of range.
Status set_hf_tokenizer_metadata(GgufWriter& w, const HfTokenizerFiles& files);

// The same from the files' contents, already read: `files` names them in
// errors (tokenizer_config empty: none, and `config_text` is ignored).
Status set_hf_tokenizer_metadata_from_text(GgufWriter& w, const HfTokenizerFiles& files,
                                           std::string_view tokenizer_text, std::string_view config_text);

}  // namespace duet
