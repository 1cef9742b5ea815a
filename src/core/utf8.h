// UTF-8 as SentencePiece judges it: a character is valid only in its shortest
// form, outside the surrogates and at most U+10FFFF. Each byte that does not
// start a valid character stands for one U+FFFD, both when text is encoded
// and when bytes are decoded. And the one encoder of code points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace duet::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// What the bytes at the front of a buffer hold.
struct Prefix {
  enum Kind { kValid, kInvalid, kIncomplete } kind;
  size_t len;  // bytes of the valid character; 1 for kInvalid; bytes seen for kIncomplete
};

// Classifies the character at the front of `s` (non-empty). kIncomplete means
// the bytes so far could still begin a valid character if more arrive.
inline Prefix classify(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {Prefix::kValid, 1};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return {Prefix::kInvalid, 1};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {Prefix::kIncomplete, i};
    const auto b = static_cast<uint8_t>(s[i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Prefix::kInvalid, 1};
  }
  return {Prefix::kValid, need};
}

inline bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Prefix p = classify(s.substr(i));
    if (p.kind != Prefix::kValid) return false;
    i += p.len;
  }
  return true;
}

// Appends code point cp; a surrogate or a value above U+10FFFF, which have no
// UTF-8 form, as U+FFFD.
inline void append(uint32_t cp, std::string& out) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// `s` with every byte that is not part of a valid character replaced by U+FFFD.
inline std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const Prefix p = classify(s.substr(i));
    if (p.kind == Prefix::kValid) {
      out.append(s.substr(i, p.len));
      i += p.len;
    } else {
      out.append(kReplacement);
      i += 1;
    }
  }
  return out;
}

}  // namespace duet::utf8
