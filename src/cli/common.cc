#include "cli/common.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace duet::cli {

Result<std::string> read_text(const std::string& path) {
  if (path == "-") {
    std::ostringstream os;
    os << std::cin.rdbuf();
    return os.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(path, ": cannot open: ", std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Result<KvType> kv_type_option(const std::string& name, const KvShape& shape) {
  DUET_ASSIGN(const KvType t, parse_kv_type(name));
  if (Status st = check_kv_type(t, shape.head_dim); !st) return err("--kv-type ", name, ": ", st.error().message);
  return t;
}

void add_kv_type_option(CLI::App& app, std::string& name) {
  // Checked while parsing, so a bad name fails before any model is loaded.
  app.add_option("--kv-type", name, "KV cache storage: f32, f16, q8 (int8 + scale per token and head), q4")
      ->capture_default_str()
      ->check([](const std::string& s) {
        Result<KvType> t = parse_kv_type(s);
        return t ? std::string() : t.error().message;
      });
}

Result<std::vector<int32_t>> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string cleaned = text;
  std::replace(cleaned.begin(), cleaned.end(), ',', ' ');
  std::istringstream is(cleaned);
  std::string word;
  while (is >> word) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(word.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
      return err("'", word, "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

void add_threads_option(CLI::App& app, int32_t& threads) {
  app.add_option("-t,--threads", threads, "Threads (0: all cores)");
}

void add_no_mmap_option(CLI::App& app, bool& no_mmap) {
  app.add_flag("--no-mmap", no_mmap,
               "Read the model into memory (transparent huge pages) instead of mapping it");
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace duet::cli
