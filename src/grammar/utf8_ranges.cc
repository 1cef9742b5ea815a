#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace duet {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, int n, uint8_t* out) {
  static const uint8_t kLead[5] = {0, 0x00, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// [lo, hi] share one encoded length n. Splits it until each piece is a
// product of per-byte ranges: a piece is a product when, for every
// continuation byte below some position, lo's bytes are all 0x80 and hi's
// all 0xBF wherever lo and hi differ above.
void split_same_length(uint32_t lo, uint32_t hi, int n, std::vector<BytePattern>& out) {
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split_same_length(lo, lo | m, n, out);
      split_same_length((lo | m) + 1, hi, n, out);
      return;
    }
    if ((hi & m) != m) {
      split_same_length(lo, (hi & ~m) - 1, n, out);
      split_same_length(hi & ~m, hi, n, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  encode(lo, n, a);
  encode(hi, n, b);
  BytePattern p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<size_t>(i)].add_range(a[i], b[i]);
  out.push_back(std::move(p));
}

// Merges two patterns of one length that differ in exactly one position:
// their union is again a product.
bool try_merge(BytePattern& a, const BytePattern& b) {
  if (a.size() != b.size()) return false;
  size_t diff = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (diff != a.size()) return false;
    diff = i;
  }
  if (diff != a.size()) a[diff].add_all(b[diff]);
  return true;
}

}  // namespace

std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges) {
  std::vector<CodeRange> cut;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (lo < kSurrogateLo && hi > kSurrogateHi) {
      cut.push_back({lo, kSurrogateLo - 1});
      cut.push_back({kSurrogateHi + 1, hi});
    } else if (lo >= kSurrogateLo && hi <= kSurrogateHi) {
      continue;
    } else if (lo >= kSurrogateLo && lo <= kSurrogateHi) {
      cut.push_back({kSurrogateHi + 1, hi});
    } else if (hi >= kSurrogateLo && hi <= kSurrogateHi) {
      cut.push_back({lo, kSurrogateLo - 1});
    } else {
      cut.push_back({lo, hi});
    }
  }
  std::sort(cut.begin(), cut.end());
  std::vector<CodeRange> merged;
  for (const CodeRange& r : cut) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
}

std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const CodeRange& r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_ranges(std::move(out));
}

std::vector<BytePattern> utf8_patterns(const std::vector<CodeRange>& ranges) {
  static const uint32_t kBandEnd[5] = {0, 0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  std::vector<BytePattern> pieces;
  for (const CodeRange& r : ranges) {
    for (int n = 1; n <= 4; ++n) {
      const uint32_t band_lo = n == 1 ? 0 : kBandEnd[n - 1] + 1;
      const uint32_t lo = std::max(r.first, band_lo), hi = std::min(r.second, kBandEnd[n]);
      if (lo <= hi) split_same_length(lo, hi, n, pieces);
    }
  }
  std::vector<BytePattern> merged;
  for (BytePattern& p : pieces) {
    bool done = false;
    for (BytePattern& m : merged)
      if ((done = try_merge(m, p))) break;
    if (!done) merged.push_back(std::move(p));
  }
  // A merge can enable another; repeat until nothing changes (a few passes).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < merged.size() && !changed; ++i)
      for (size_t j = i + 1; j < merged.size(); ++j)
        if (try_merge(merged[i], merged[j])) {
          merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(j));
          changed = true;
          break;
        }
  }
  return merged;
}

void append_utf8(uint32_t cp, std::string& out) {
  uint8_t b[4];
  const int n = encoded_length(cp);
  encode(cp, n, b);
  out.append(reinterpret_cast<const char*>(b), static_cast<size_t>(n));
}

}  // namespace duet
