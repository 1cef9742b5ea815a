// GPT-2's byte-level alphabet and the UTF-8 conversions around it.
//
// Byte-level BPE vocabularies spell every token as text over 256 printable
// code points, one per byte value: printable Latin-1 bytes stand for
// themselves and the rest (controls, space, NBSP, soft hyphen) are moved to
// U+0100 upwards, so that " " is written "Ġ" and "\n" is written "Ċ".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace duet {

// The code point that stands for byte `b` in token text.
uint32_t byte_to_codepoint(uint8_t b);

// The byte that code point `cp` stands for, or -1 if it is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

// Decodes UTF-8 into code points. Each maximal ill-formed subpart (an invalid
// byte, or a truncated, overlong or surrogate sequence as far as it went)
// becomes one U+FFFD: Unicode's recommended practice, the one WHATWG's
// TextDecoder and Python's errors="replace" follow.
void decode_utf8_lossy(std::string_view text, std::vector<uint32_t>& out);

// The bytes a byte-level token's text stands for. False if `text` is not
// valid UTF-8 or holds a code point outside the alphabet.
bool byte_level_decode(std::string_view text, std::string& out);

}  // namespace duet
