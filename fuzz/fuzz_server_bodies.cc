// The bodies of the server's other JSON routes from untrusted text, parsed
// as the server does it: POST /v1/embeddings (tokenized with a small
// byte-level vocabulary), llama.cpp's /tokenize and /detokenize, and the
// values of --cors-origin. The first byte picks the parser; every error
// must render as an OpenAI error object.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"
#include "formats/gguf.h"
#include "server/cors.h"
#include "server/embeddings_api.h"
#include "server/tokenize_api.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"

namespace {

// GPT-2 style: the 256 byte tokens, three merges, a control and a
// user-defined token, so ids, pieces and partial UTF-8 all occur.
std::unique_ptr<duet::Tokenizer> byte_level_vocab() {
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

std::vector<std::string> lines(std::string_view s) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t nl = std::min(s.find('\n', at), s.size());
    out.emplace_back(s.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<duet::Tokenizer> tok = byte_level_vocab();
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<duet::server::ApiError> e;
  std::string out;
  switch (data[0] % 4) {
    case 0: {
      duet::server::EmbeddingsRequest r;
      e = duet::server::parse_embeddings_body(body, *tok, /*dim=*/64, {}, r);
      break;
    }
    case 1:
      e = duet::server::tokenize_body(body, *tok, out);
      break;
    case 2:
      e = duet::server::detokenize_body(body, *tok, out);
      break;
    case 3:
      (void)duet::server::parse_cors_origins(lines(body));
      break;
  }
  if (e) (void)e->to_json();
  return 0;
}
