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

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace duet::cli
