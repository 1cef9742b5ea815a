// An error as OpenAI's API reports it: an HTTP status and
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace duet::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field; empty: null
  std::string code;   // empty: null

  nlohmann::json to_json() const;
};

inline ApiError invalid(std::string message, std::string param = {}, std::string code = {}) {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

// JSON text for the wire: invalid UTF-8 (say, half a character in a token's
// bytes) becomes U+FFFD instead of failing.
std::string dump(const nlohmann::json& j);

}  // namespace duet::server
