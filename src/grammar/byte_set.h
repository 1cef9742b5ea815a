// A set of byte values (256 bits). The compiled grammar matches one byte at
// a time, so every terminal — a literal character, a class, a UTF-8 lead or
// continuation byte — is a ByteSet.
#pragma once

#include <cstdint>

namespace duet {

struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};

  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  void add_all(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) w[i] |= o.w[i];
  }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  bool operator==(const ByteSet& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3];
  }
  bool operator<(const ByteSet& o) const {
    for (int i = 0; i < 4; ++i)
      if (w[i] != o.w[i]) return w[i] < o.w[i];
    return false;
  }
};

}  // namespace duet
