#include "server/http_parser.h"

#include <cstdint>
#include <string_view>

namespace duet::server {
namespace {

// RFC 9110 token characters: what a method and a field name are made of.
bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(c)) return false;
  return true;
}

// Field values may hold visible characters, spaces, tabs and obs-text; any
// other control (a bare CR, NUL) is how smuggled lines start.
bool is_field_value(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// A decimal length; false on anything but digits or past 2^62.
bool parse_length(std::string_view s, size_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<size_t>(c - '0');
  }
  return true;
}

bool parse_hex(std::string_view s, size_t& out) {
  if (s.empty() || s.size() > 15) return false;
  out = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    out = out * 16 + static_cast<size_t>(d);
  }
  return true;
}

constexpr size_t kMaxChunkLine = 1024;  // a size and its extensions
constexpr size_t kMaxMethod = 32;       // longer than any registered method

// Lines of the head and of the chunked coding end in CRLF (RFC 9112 2.2).
// A bare LF, which the RFC lets a recipient accept, is refused: a proxy in
// front that did not accept it would frame the same bytes another way.
bool ends_in_crlf(std::string_view in, size_t nl) { return nl > 0 && in[nl - 1] == '\r'; }

// Whether `in` can still begin a request line: a method (a token) and a
// space. A TLS ClientHello (0x16 ...) or other binary fails at its first
// byte, so it is told 400 at once instead of waiting out the head's timeout.
bool could_start_request(std::string_view in) {
  for (size_t i = 0; i < in.size() && i <= kMaxMethod; ++i) {
    if (in[i] == ' ') return i > 0;
    if (!is_tchar(in[i])) return false;
  }
  return in.size() <= kMaxMethod;
}

}  // namespace

void RequestParser::reset() {
  state_ = State::kHead;
  started_ = false;
  scanned_ = 0;
  req_ = {};
  chunked_ = false;
  remaining_ = 0;
  chunk_ = Chunk::kSize;
  trailer_bytes_ = 0;
  error_status_ = 0;
  error_message_.clear();
}

bool RequestParser::expects_continue() const {
  return state_ == State::kBody && iequals(trim(req_.header("Expect")), "100-continue");
}

RequestParser::State RequestParser::fail(int status, std::string message) {
  error_status_ = status;
  error_message_ = std::move(message);
  return state_ = State::kError;
}

RequestParser::State RequestParser::feed(std::string& in) {
  if (state_ == State::kHead) {
    state_ = parse_head(in);
    if (state_ == State::kBody && remaining_ == 0 && !chunked_) state_ = State::kDone;
  }
  if (state_ == State::kBody) state_ = chunked_ ? parse_chunked(in) : parse_body(in);
  return state_;
}

RequestParser::State RequestParser::parse_head(std::string& in) {
  // Empty lines before a request line are tolerated (RFC 9112 2.2): some
  // clients end a body with an extra CRLF.
  if (!started_) {
    size_t skip = 0;
    while (skip < in.size() && (in[skip] == '\r' || in[skip] == '\n')) ++skip;
    in.erase(0, skip);
    if (in.empty()) return State::kHead;
    started_ = true;
  }
  if (scanned_ == 0 && !could_start_request(in)) return fail(400, "not an HTTP request");
  for (;;) {
    const size_t nl = in.find('\n', scanned_);
    if (nl == std::string::npos) {
      if (in.size() > limits_.max_header_bytes) return fail(431, "the request head is too large");
      return State::kHead;
    }
    if (nl + 1 > limits_.max_header_bytes) return fail(431, "the request head is too large");
    if (!ends_in_crlf(in, nl)) return fail(400, "a line of the request head ends in a bare LF, not CRLF");
    const std::string_view line = strip_cr(std::string_view(in).substr(scanned_, nl - scanned_));
    if (!line.empty()) {
      scanned_ = nl + 1;
      continue;
    }
    const std::string head = in.substr(0, scanned_);
    in.erase(0, nl + 1);
    if (parse_fields(head) == State::kError) return State::kError;
    return frame_body();
  }
}

RequestParser::State RequestParser::parse_fields(std::string_view head) {
  size_t eol = head.find('\n');
  const std::string_view line = strip_cr(head.substr(0, eol));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  if (target.empty() || !is_field_value(target) || target.find_first_of(" \t") != std::string_view::npos)
    return fail(400, "malformed request target");
  if (version == "HTTP/1.1") req_.minor_version = 1;
  else if (version == "HTTP/1.0") req_.minor_version = 0;
  else if (version.substr(0, 5) == "HTTP/") return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
  else return fail(400, "malformed HTTP version");
  req_.method = method;
  req_.target = target;
  req_.path = target.substr(0, target.find('?'));

  while (eol != std::string_view::npos && eol + 1 < head.size()) {
    const size_t start = eol + 1;
    eol = head.find('\n', start);
    const std::string_view field = strip_cr(head.substr(start, eol == std::string_view::npos ? eol : eol - start));
    // Folded lines (obs-fold) are refused, as RFC 9112 5.2 allows.
    if (field.front() == ' ' || field.front() == '\t') return fail(400, "folded header lines are not accepted");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon)))
      return fail(400, "malformed header field");
    const std::string_view value = trim(field.substr(colon + 1));
    if (!is_field_value(value)) return fail(400, "malformed header value");
    req_.headers.emplace_back(std::string(field.substr(0, colon)), std::string(value));
  }
  return State::kHead;
}

// How the body is delimited (RFC 9112 6.3), refusing every ambiguous case.
RequestParser::State RequestParser::frame_body() {
  int n_te = 0;
  bool has_length = false;
  size_t length = 0;
  for (const auto& [name, value] : req_.headers) {
    if (iequals(name, "Transfer-Encoding")) {
      ++n_te;
      if (!iequals(value, "chunked")) return fail(501, "only the chunked transfer coding is supported");
    } else if (iequals(name, "Content-Length")) {
      size_t n;
      if (!parse_length(value, n)) return fail(400, "malformed Content-Length");
      if (has_length && n != length) return fail(400, "conflicting Content-Length headers");
      has_length = true;
      length = n;
    }
  }
  if (n_te > 1) return fail(400, "repeated Transfer-Encoding");
  if (n_te == 1 && has_length) return fail(400, "both Content-Length and Transfer-Encoding");
  if (n_te == 1 && req_.minor_version == 0) return fail(400, "chunked transfer coding in an HTTP/1.0 request");
  if (length > limits_.max_body_bytes) return fail(413, "the request body is too large");
  chunked_ = n_te == 1;
  remaining_ = length;
  if (!chunked_ && length > 0) req_.body.reserve(length);
  return State::kBody;
}

RequestParser::State RequestParser::parse_body(std::string& in) {
  const size_t take = std::min(remaining_, in.size());
  req_.body.append(in, 0, take);
  in.erase(0, take);
  remaining_ -= take;
  return remaining_ == 0 ? State::kDone : State::kBody;
}

RequestParser::State RequestParser::parse_chunked(std::string& in) {
  for (;;) {
    switch (chunk_) {
      case Chunk::kSize: {
        const size_t nl = in.find('\n');
        if (nl == std::string::npos)
          return in.size() > kMaxChunkLine ? fail(400, "malformed chunk size") : State::kBody;
        if (nl > kMaxChunkLine || !ends_in_crlf(in, nl)) return fail(400, "malformed chunk size");
        std::string_view line = strip_cr(std::string_view(in).substr(0, nl));
        line = trim(line.substr(0, line.find(';')));  // chunk extensions are ignored
        size_t size;
        if (!parse_hex(line, size)) return fail(400, "malformed chunk size");
        in.erase(0, nl + 1);
        if (size == 0) {
          chunk_ = Chunk::kTrailer;
          break;
        }
        if (req_.body.size() + size > limits_.max_body_bytes) return fail(413, "the request body is too large");
        remaining_ = size;
        chunk_ = Chunk::kData;
        break;
      }
      case Chunk::kData: {
        const size_t take = std::min(remaining_, in.size());
        req_.body.append(in, 0, take);
        in.erase(0, take);
        remaining_ -= take;
        if (remaining_ > 0) return State::kBody;
        chunk_ = Chunk::kDataEnd;
        break;
      }
      case Chunk::kDataEnd:
        if (in.empty() || (in[0] == '\r' && in.size() < 2)) return State::kBody;
        if (in.compare(0, 2, "\r\n") == 0) in.erase(0, 2);
        else return fail(400, "a chunk is longer than its size");
        chunk_ = Chunk::kSize;
        break;
      case Chunk::kTrailer: {
        // Trailer fields are read and dropped: none changes how duet answers.
        const size_t nl = in.find('\n');
        if (nl == std::string::npos)
          return in.size() + trailer_bytes_ > limits_.max_header_bytes ? fail(431, "the trailer is too large")
                                                                        : State::kBody;
        trailer_bytes_ += nl + 1;
        if (trailer_bytes_ > limits_.max_header_bytes) return fail(431, "the trailer is too large");
        if (!ends_in_crlf(in, nl)) return fail(400, "a trailer line ends in a bare LF, not CRLF");
        const bool last = strip_cr(std::string_view(in).substr(0, nl)).empty();
        in.erase(0, nl + 1);
        if (last) return State::kDone;
        break;
      }
    }
  }
}

}  // namespace duet::server
