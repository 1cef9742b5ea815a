// POST /tokenize and POST /detokenize in llama.cpp server's shapes:
//   /tokenize   {"content": "text", "add_special": false, "parse_special": true,
//                "with_pieces": false}
//            -> {"tokens": [ids]}, or with pieces
//               {"tokens": [{"id": 1, "piece": "text" or [bytes]}]}
//   /detokenize {"tokens": [ids]} -> {"content": "text"}
// A piece that is not whole UTF-8 (part of a character) is its byte values.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace duet::server {

// Each returns the response's JSON text in `out`, or the 400 saying what is
// wrong with the body.
// `max_tokens` (0: none) caps what /tokenize returns: each token is ~4-30
// bytes of response, a few times what it took in the request.
std::optional<ApiError> tokenize_body(std::string_view body, const Tokenizer& tok, size_t max_tokens,
                                      std::string& out);
std::optional<ApiError> detokenize_body(std::string_view body, const Tokenizer& tok, std::string& out);

}  // namespace duet::server
