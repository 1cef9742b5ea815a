#include "tokenizer/byte_unicode.h"

#include <array>

namespace duet {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;

// Bytes that are printable Latin-1 characters keep their own code point.
constexpr bool is_self_mapped(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every stand-in is below U+0200
};

const ByteTables& tables() {
  static const ByteTables t = [] {
    ByteTables r;
    r.from_cp.fill(-1);
    uint32_t next = 256;  // the others get U+0100.. in byte order
    for (int b = 0; b < 256; ++b) {
      r.to_cp[static_cast<size_t>(b)] = is_self_mapped(b) ? static_cast<uint32_t>(b) : next++;
      r.from_cp[r.to_cp[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return tables().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) { return cp < 512 ? tables().from_cp[cp] : -1; }

void decode_utf8_lossy(std::string_view text, std::vector<uint32_t>& out) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    // Well-formed sequences (Unicode Table 3-7): length, and the range of
    // the second byte, which excludes overlongs, surrogates and > U+10FFFF.
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
    else if (b0 == 0xE0) { len = 3; lo = 0xA0; }
    else if (b0 >= 0xE1 && b0 <= 0xEC) len = 3;
    else if (b0 == 0xED) { len = 3; hi = 0x9F; }
    else if (b0 >= 0xEE && b0 <= 0xEF) len = 3;
    else if (b0 == 0xF0) { len = 4; lo = 0x90; }
    else if (b0 >= 0xF1 && b0 <= 0xF3) len = 4;
    else if (b0 == 0xF4) { len = 4; hi = 0x8F; }
    if (len == 0) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    uint32_t cp = b0 & (0xFF >> (len + 1));
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const uint8_t b = s[i + k];
      const uint8_t min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (b < min || b > max) break;
      cp = (cp << 6) | (b & 0x3F);
    }
    out.push_back(k == len ? cp : kReplacement);
    i += k;
  }
}

bool byte_level_decode(std::string_view text, std::string& out) {
  std::vector<uint32_t> cps;
  decode_utf8_lossy(text, cps);
  for (uint32_t cp : cps) {
    const int b = codepoint_to_byte(cp);
    if (b < 0) return false;  // also catches U+FFFD from invalid UTF-8
    out += static_cast<char>(b);
  }
  return true;
}

}  // namespace duet
