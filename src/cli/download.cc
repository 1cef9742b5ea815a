#include "cli/download.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "cli/progress.h"

namespace duet::cli {
namespace fs = std::filesystem;

namespace {

int64_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

// One GET from `offset` on, appended to `part`. Returns the bytes the file
// holds afterwards; an error only for answers that retrying cannot fix.
Result<int64_t> fetch_from(const DownloadRequest& r, const std::string& part, int64_t offset, ProgressBar& bar,
                           bool& transient_failure) {
  transient_failure = false;
  httplib::Client cli(r.endpoint);
  cli.set_follow_location(true);
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!r.token.empty()) headers.emplace("Authorization", "Bearer " + r.token);
  if (offset > 0) headers.emplace("Range", "bytes=" + std::to_string(offset) + "-");

  std::ofstream out;
  int status = 0;
  int64_t have = offset;
  auto res = cli.Get(
      r.path, headers,
      [&](const httplib::Response& resp) {
        status = resp.status;
        if (status == 206) {
          out.open(part, std::ios::binary | std::ios::app);
        } else if (status == 200) {
          have = 0;  // the server sent the whole file: start over
          out.open(part, std::ios::binary | std::ios::trunc);
        } else {
          return false;
        }
        return static_cast<bool>(out);
      },
      [&](const char* data, size_t n) {
        out.write(data, static_cast<std::streamsize>(n));
        have += static_cast<int64_t>(n);
        bar.update(static_cast<double>(have) / (1 << 20));
        return static_cast<bool>(out);
      });
  out.close();
  if (status == 416 && r.size >= 0 && offset >= r.size) return offset;  // nothing left to send
  if (status != 0 && status != 200 && status != 206) {
    if (status == 401 || status == 403)
      return err("GET ", r.endpoint, r.path, ": HTTP ", status, " (a gated or private repository needs HF_TOKEN)");
    if (status == 404) return err("GET ", r.endpoint, r.path, ": HTTP 404 (no such file)");
    transient_failure = status >= 500;
    return err("GET ", r.endpoint, r.path, ": HTTP ", status);
  }
  if (status != 0 && !out) return err("cannot write '", part, "': ", std::strerror(errno));
  if (!res || status == 0) {
    transient_failure = true;
    return err("GET ", r.endpoint, r.path, ": ", httplib::to_string(res.error()));
  }
  return have;
}

}  // namespace

Result<std::string> sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err("cannot read '", path, "': ", std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return err("SHA-256 unavailable");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return err("cannot read '", path, "'");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  std::string hex;
  char b[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", digest[i]);
    hex += b;
  }
  return hex;
}

Status download_file(const DownloadRequest& r) {
  const std::string part = r.dest + ".part";
  std::error_code ec;
  fs::create_directories(fs::path(r.dest).parent_path(), ec);
  if (ec) return err("cannot create '", fs::path(r.dest).parent_path().string(), "': ", ec.message());
  int64_t have = file_size_or_zero(part);
  if (r.size >= 0 && have > r.size) have = 0;  // not a prefix of this file: start over
  if (have == 0) fs::remove(part, ec);

  ProgressBar bar(file_name(r.dest), r.size > 0 ? static_cast<double>(r.size) / (1 << 20) : 0, "MiB");
  bar.update(static_cast<double>(have) / (1 << 20));
  Error last{"no attempt made", {}};
  for (int attempt = 0; attempt < r.max_attempts && (r.size < 0 || have < r.size); ++attempt) {
    bool transient = false;
    auto got = fetch_from(r, part, have, bar, transient);
    if (got) {
      have = *got;
      if (r.size < 0) break;  // a complete answer of unknown length
      continue;
    }
    last = got.error();
    if (!transient) return last;
    have = file_size_or_zero(part);
  }
  bar.finish();
  if (r.size >= 0 && have < r.size)
    return err(last.message, " (", have, " of ", r.size, " bytes after ", r.max_attempts,
               " attempts; run again to resume from ", part, ")");

  if (const int64_t got = file_size_or_zero(part); r.size >= 0 && got != r.size) {
    fs::remove(part, ec);
    return err(r.endpoint, r.path, ": got ", got, " bytes, the listing says ", r.size, "; the download was removed");
  }
  if (!r.sha256.empty()) {
    DUET_ASSIGN(const std::string digest, sha256_file(part));
    if (digest != r.sha256) {
      fs::remove(part, ec);
      return err(r.endpoint, r.path, ": checksum mismatch (SHA-256 ", digest, ", the listing says ", r.sha256,
                 "); the download was removed");
    }
  }
  fs::rename(part, r.dest, ec);
  if (ec) return err("cannot rename '", part, "' to '", r.dest, "': ", ec.message());
  return {};
}

}  // namespace duet::cli
