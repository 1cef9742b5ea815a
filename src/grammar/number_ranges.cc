#include "grammar/number_ranges.h"

#include <string>
#include <vector>

#include "grammar/gbnf_text.h"

namespace duet {

namespace {

constexpr int kMaxDigits = 16;
const char* kFraction = "(\".\" [0-9]{1,16})";
const char* kZeroFraction = "(\".\" \"0\"{1,16})";

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

// Numerals of n digits between lo and hi (same length, leading zeros
// allowed: these are the tails of longer numerals).
std::string same_length(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 1) return digit_class(lo[0], hi[0]);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return digit_class(lo[0], lo[0]) + " " + same_length(lo_rest, hi_rest);
  std::vector<std::string> alts;
  char first = lo[0], last = hi[0];
  if (lo_rest != std::string(n - 1, '0')) {
    alts.push_back(digit_class(lo[0], lo[0]) + " " + gbnf_group({same_length(lo_rest, std::string(n - 1, '9'))}));
    ++first;
  }
  std::string hi_part;
  if (hi_rest != std::string(n - 1, '9')) {
    hi_part = digit_class(hi[0], hi[0]) + " " + gbnf_group({same_length(std::string(n - 1, '0'), hi_rest)});
    --last;
  }
  if (first <= last) alts.push_back(digit_class(first, last) + " [0-9]{" + std::to_string(n - 1) + "}");
  if (!hi_part.empty()) alts.push_back(hi_part);
  return gbnf_group(alts);
}

uint64_t pow10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

int digits(uint64_t x) {
  int n = 1;
  while (x >= 10) {
    x /= 10;
    ++n;
  }
  return n;
}

// Numerals (no sign, no leading zeros) of a <= x <= b, or a <= x.
std::string unsigned_range(uint64_t a, std::optional<uint64_t> b) {
  std::vector<std::string> alts;
  const int da = digits(a);
  const int db = b ? digits(*b) : kMaxDigits;
  for (int len = da; len <= db; ++len) {
    const uint64_t lo = len == da ? a : pow10(len - 1);
    const uint64_t hi = (b && len == db) ? *b : pow10(len) - 1;
    if (!b && len > da) {  // every longer numeral, in one alternative
      alts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," + std::to_string(kMaxDigits - 1) + "}");
      break;
    }
    alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  return gbnf_group(alts);
}

std::string magnitude(uint64_t a, std::optional<uint64_t> b) {
  if (!b) return unsigned_range(a, std::nullopt) + " " + kFraction + "?";
  std::vector<std::string> alts;
  if (a + 1 <= *b) alts.push_back(unsigned_range(a, *b - 1) + " " + kFraction + "?");
  alts.push_back(std::string("\"") + std::to_string(*b) + "\" " + kZeroFraction + "?");
  return gbnf_group(alts);
}

std::optional<uint64_t> negate(std::optional<int64_t> x) {
  if (!x) return std::nullopt;
  return static_cast<uint64_t>(-*x);
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (hi && *hi < 0) return "\"-\" " + unsigned_range(static_cast<uint64_t>(-*hi), negate(lo));
  if (lo && *lo >= 0) return unsigned_range(static_cast<uint64_t>(*lo), hi ? std::optional<uint64_t>(*hi) : std::nullopt);
  std::vector<std::string> alts;
  alts.push_back(unsigned_range(0, hi ? std::optional<uint64_t>(*hi) : std::nullopt));
  if (!lo || *lo <= -1) alts.push_back("\"-\" " + unsigned_range(1, negate(lo)));
  return gbnf_group(alts);
}

std::string number_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  auto opt_u = [](std::optional<int64_t> x) { return x ? std::optional<uint64_t>(*x) : std::nullopt; };
  if (lo && *lo >= 0) return magnitude(static_cast<uint64_t>(*lo), opt_u(hi));
  if (hi && *hi <= 0) return "\"-\" " + magnitude(static_cast<uint64_t>(-*hi), negate(lo));
  return gbnf_group({magnitude(0, opt_u(hi)), "\"-\" " + magnitude(0, negate(lo))});
}

}  // namespace duet
