#include "server/http_message.h"

#include <cctype>
#include <cstdio>

namespace duet::server {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

const std::string& HttpRequest::header(std::string_view name) const {
  static const std::string kNone;
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return kNone;
}

bool HttpRequest::has_header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return true;
  return false;
}

const char* status_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

std::string response_head(const HttpResponse& res, long long length, bool close) {
  std::string h = "HTTP/1.1 " + std::to_string(res.status) + " " + status_reason(res.status) + "\r\n";
  if (!res.content_type.empty()) h += "Content-Type: " + res.content_type + "\r\n";
  for (const auto& [k, v] : res.headers) h += k + ": " + v + "\r\n";
  if (length == kChunked) h += "Transfer-Encoding: chunked\r\n";
  else if (length >= 0 && res.status != 204) h += "Content-Length: " + std::to_string(length) + "\r\n";  // a 204 has no body
  if (close) h += "Connection: close\r\n";
  return h + "\r\n";
}

std::string chunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string c = size;
  c.append(data);
  return c + "\r\n";
}

}  // namespace duet::server
