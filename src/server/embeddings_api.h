// POST /v1/embeddings in OpenAI's shape. `input` is a string, an array of
// strings, an array of token ids, or an array of such arrays; each string
// or id array is one input, embedded as one L2-normalised vector pooled the
// model's way (`<arch>.pooling_type`, mean where the file names none).
// `encoding_format` is "float" (default) or "base64" (the little-endian
// float32 bytes); `dimensions` must equal the model's width, since duet
// cannot honestly shorten a vector the model was not trained to shorten.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/embedder.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace duet::server {

// What one request may ask (duet serve's --max-embedding-inputs and
// --max-embedding-tokens); more is a 400. The defaults are OpenAI's limits,
// so that its clients' batches fit.
struct EmbeddingLimits {
  size_t max_inputs = 2048;
  int64_t max_tokens = 300000;  // summed over the inputs
};

struct EmbeddingsRequest {
  std::string model;
  std::vector<std::vector<int32_t>> inputs;  // strings tokenized, BOS as the vocabulary asks
  bool base64 = false;
};

// Parses and tokenizes the body; `dim` is the model's embedding width.
// Token ids' range and the inputs' lengths are the engine's to check; the
// limits are checked as the inputs are read, so an oversized request is
// refused before all of it is tokenized.
std::optional<ApiError> parse_embeddings_body(std::string_view body, const Tokenizer& tok, int32_t dim,
                                              const EmbeddingLimits& limits, EmbeddingsRequest& out);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
//  "model", "usage": {"prompt_tokens", "total_tokens"}}
nlohmann::json embeddings_response(const EmbeddingsRequest& req, const Embeddings& vectors, const std::string& model);

// RFC 4648 base64 of the floats' little-endian bytes, as OpenAI sends them.
std::string base64_floats(const std::vector<float>& v);

}  // namespace duet::server
