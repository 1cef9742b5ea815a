// Cross-origin resource sharing for browser clients (`duet serve
// --cors-origin`). Off by default: without allowed origins no response
// carries Access-Control-* headers, so a browser keeps pages of other
// origins from reading the API (an OPTIONS request still gets 204 with
// Allow, as plain HTTP answers it). With origins, a request whose Origin
// is allowed gets Access-Control-Allow-Origin (the origin itself, or `*`
// when every origin is), and a preflight (OPTIONS with
// Access-Control-Request-Method) gets the methods, the headers asked for
// plus Authorization and Content-Type, and a max-age; a preflight from an
// origin not allowed is a 403.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "server/http_message.h"

namespace duet::server {

// How long a browser may cache a preflight's answer (Chromium caps it at
// two hours, Firefox at one day).
inline constexpr int kCorsMaxAgeSeconds = 7200;

struct CorsPolicy {
  std::vector<std::string> origins;  // exact origins ("https://app.example"), or "*"
  bool enabled() const { return !origins.empty(); }
  bool allows_any() const;
  bool allows(const std::string& origin) const;
};

// The values of a repeatable --cors-origin, each a comma-separated list of
// "*" or scheme://host[:port] origins.
Result<CorsPolicy> parse_cors_origins(const std::vector<std::string>& values);

// A preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_preflight(const HttpRequest& req);

// Adds the headers for an ordinary response to `req` (none unless enabled
// and the request's Origin is allowed).
void add_cors_headers(const CorsPolicy& policy, const HttpRequest& req, HttpResponse& res);

// Answers an OPTIONS request to a route that takes `methods` (e.g. "GET,
// POST"): a preflight as the policy says, anything else 204 with Allow.
void answer_options(const CorsPolicy& policy, const HttpRequest& req, const std::string& methods,
                    HttpResponse& res);

}  // namespace duet::server
