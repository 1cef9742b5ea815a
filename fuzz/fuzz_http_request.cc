// HTTP/1.1 requests off the wire, as the server's connections parse them:
// the input is fed in pieces (the first byte picks their size, as a slow or
// fragmenting client would send them) and every pipelined request is read
// in turn. The outcome must not depend on the split: the same requests, the
// same bodies and the same refusal as when the input arrives in one piece.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/http_parser.h"

namespace {

struct Outcome {
  std::vector<std::string> requests;  // method, target and body of each
  int error_status = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome parse_all(const std::string& wire, size_t step, const duet::server::HttpLimits& limits) {
  using State = duet::server::RequestParser::State;
  duet::server::RequestParser p(limits);
  Outcome out;
  std::string in;
  for (size_t i = 0; i < wire.size(); i += step) {
    in.append(wire, i, step);
    State s;
    while ((s = p.feed(in)) == State::kDone) {
      const auto& r = p.request();
      if (r.body.size() > limits.max_body_bytes) __builtin_trap();
      out.requests.push_back(r.method + " " + r.target + " " + r.body);
      p.reset();
    }
    if (s == State::kError) {
      const int st = p.error_status();
      if (st != 400 && st != 413 && st != 431 && st != 501 && st != 505) __builtin_trap();
      out.error_status = st;
      return out;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  duet::server::HttpLimits limits;
  limits.max_header_bytes = 512;  // small, so inputs reach the limits
  limits.max_body_bytes = 256;
  const size_t step = 1 + data[0] % 17;
  const std::string wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!(parse_all(wire, step, limits) == parse_all(wire, wire.size() + 1, limits))) __builtin_trap();
  return 0;
}
