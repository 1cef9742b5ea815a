// What one client may make the server hold: the bounds that keep slow,
// half-sent or oversized requests from tying up memory or connections.
#pragma once

#include <cstddef>
#include <cstdint>

namespace duet::server {

struct HttpLimits {
  size_t max_header_bytes = 32 << 10;  // request line and headers; more: 431
  size_t max_body_bytes = 1 << 20;     // after de-chunking; more: 413
  int32_t header_timeout_ms = 10000;   // to send the whole head (and idle keep-alive)
  int32_t body_timeout_ms = 30000;     // to send the whole body after the head
  int32_t write_timeout_ms = 30000;    // for the client to take one write
  int32_t max_conns_per_address = 256; // open connections from one address; more: 429 and closed
  int32_t max_conns = 4096;             // open connections in all; more: 503 and closed
};

}  // namespace duet::server
