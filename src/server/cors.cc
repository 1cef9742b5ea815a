#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "server/api_error.h"

namespace duet::server {

namespace {

std::string trim(std::string s) {
  const auto is_space = [](unsigned char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && is_space(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && is_space(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// An origin as browsers send it: scheme "://" host, an optional port, no
// path; letters, digits and the few punctuation marks hosts use.
bool is_origin(const std::string& s) {
  const size_t sep = s.find("://");
  if (sep == std::string::npos || sep == 0 || sep + 3 >= s.size()) return false;
  for (char c : s.substr(sep + 3))
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
      return false;
  return std::all_of(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(sep),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'; });
}

// A header-name list as a preflight asks for it (tokens and commas); a
// malformed one gets the default list instead of being echoed.
bool is_header_list(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ';
  });
}

}  // namespace

bool CorsPolicy::allows_any() const { return std::find(origins.begin(), origins.end(), "*") != origins.end(); }

bool CorsPolicy::allows(const std::string& origin) const {
  return !origin.empty() && (allows_any() || std::find(origins.begin(), origins.end(), origin) != origins.end());
}

Result<CorsPolicy> parse_cors_origins(const std::vector<std::string>& values) {
  CorsPolicy p;
  for (const std::string& value : values) {
    size_t start = 0;
    for (;;) {
      const size_t comma = value.find(',', start);
      std::string origin = trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      while (origin.size() > 1 && origin.back() == '/') origin.pop_back();  // "https://a.example/" as sent without '/'
      if (origin != "*" && !is_origin(origin))
        return err("--cors-origin: '", origin, "' is not an origin (scheme://host[:port]) or *");
      p.origins.push_back(std::move(origin));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return p;
}

bool is_preflight(const HttpRequest& req) {
  return req.method == "OPTIONS" && req.has_header("Origin") && req.has_header("Access-Control-Request-Method");
}

void add_cors_headers(const CorsPolicy& policy, const HttpRequest& req, HttpResponse& res) {
  if (!policy.enabled()) return;
  const std::string& origin = req.header("Origin");
  if (!policy.allows(origin)) return;
  if (policy.allows_any()) {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  // What a client backing off a 429 must be able to read.
  res.set_header("Access-Control-Expose-Headers", "Retry-After");
}

void answer_options(const CorsPolicy& policy, const HttpRequest& req, const std::string& methods,
                    HttpResponse& res) {
  const std::string allow = methods + ", OPTIONS";
  res.status = 204;
  res.set_header("Allow", allow);
  if (!policy.enabled() || !is_preflight(req)) return;
  if (!policy.allows(req.header("Origin"))) {
    res.status = 403;
    res.set_content(dump(invalid("the origin " + req.header("Origin") + " is not allowed (--cors-origin)", "",
                                 "origin_not_allowed")
                             .to_json()),
                    "application/json");
    return;
  }
  add_cors_headers(policy, req, res);
  res.set_header("Access-Control-Allow-Methods", allow);
  // The OpenAI clients send headers of their own (x-stainless-*): what the
  // preflight asks for is allowed, with the two every client needs.
  const std::string& asked = req.header("Access-Control-Request-Headers");
  std::string headers = "Authorization, Content-Type";
  if (!asked.empty() && is_header_list(asked)) headers += ", " + asked;
  res.set_header("Access-Control-Allow-Headers", headers);
  res.set_header("Access-Control-Max-Age", std::to_string(kCorsMaxAgeSeconds));
}

}  // namespace duet::server
