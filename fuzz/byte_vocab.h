// A small byte-level vocabulary built in memory, for the fuzz targets that
// tokenize (the server's bodies, nested JSON).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "formats/gguf.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"

namespace duet::fuzz {

// GPT-2 style: the 256 byte tokens, three merges, a control and a
// user-defined token, so ids, pieces and partial UTF-8 all occur.
inline std::unique_ptr<duet::Tokenizer> byte_level_vocab() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    duet::utf8::append(duet::byte_to_codepoint(static_cast<uint8_t>(b)), s);
    tokens.push_back(s);
  }
  for (const char* t : {"ab", "bc", "abc", "<|end|>", "<tool>"}) tokens.push_back(t);
  std::vector<int32_t> types(tokens.size(), 1);
  types[259] = 3;  // control
  types[260] = 4;  // user-defined
  duet::GgufWriter w;
  w.set("tokenizer.ggml.model", duet::GgufValue::of_string("gpt2"));
  w.set("tokenizer.ggml.pre", duet::GgufValue::of_string("gpt-2"));
  w.set("tokenizer.ggml.tokens", duet::GgufValue::of_strings(tokens));
  w.set("tokenizer.ggml.token_type", duet::GgufValue::of_i32s(types));
  w.set("tokenizer.ggml.merges", duet::GgufValue::of_strings({"b c", "a b", "ab c"}));
  w.set("tokenizer.ggml.eos_token_id", duet::GgufValue::of_u32(259));
  auto vocab = duet::GgufFile::assemble("vocab.gguf", w.metadata(), {}, nullptr);
  if (!vocab) __builtin_trap();
  auto tok = duet::Tokenizer::from_gguf(*vocab);
  if (!tok) __builtin_trap();
  return std::move(tok).value();
}

}  // namespace duet::fuzz
