// One file over HTTP(S) into place, safely: bytes go to DEST.part, a cut
// connection resumes with a Range request (in this run, or in the next one
// from the .part left behind), and only a file of the expected size and
// SHA-256 is renamed to DEST. A mismatch removes the .part.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace duet::cli {

struct DownloadRequest {
  std::string endpoint;  // scheme://host[:port]
  std::string path;      // absolute path on the endpoint, already URL-encoded
  std::string token;     // bearer token, may be empty
  std::string dest;
  int64_t size = -1;     // expected bytes; -1: unknown
  std::string sha256;    // expected lowercase hex digest; empty: not checked
  int max_attempts = 5;  // connections tried before giving up
};

Status download_file(const DownloadRequest& r);

// Lowercase hex SHA-256 of a file's content.
Result<std::string> sha256_file(const std::string& path);

}  // namespace duet::cli
