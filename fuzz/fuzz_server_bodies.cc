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

#include "byte_vocab.h"
#include "server/cors.h"
#include "server/embeddings_api.h"
#include "server/tokenize_api.h"

namespace {

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
  static const std::unique_ptr<duet::Tokenizer> tok = duet::fuzz::byte_level_vocab();
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
      e = duet::server::tokenize_body(body, *tok, /*max_tokens=*/4096, out);
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
