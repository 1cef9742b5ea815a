// IEEE half and bfloat16 conversions, bit-exact, usable from any ISA level.
#pragma once

#include <cstdint>
#include <cstring>

namespace duet {

inline float bits_to_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float f16_to_f32(uint16_t h) {
  // Shift the half into a float's place and rescale: exact for normals,
  // subnormals, zero; infinities and NaNs handled separately.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t em = h & 0x7fff;
  if (em >= 0x7c00) return bits_to_f32(sign | 0x7f800000 | (static_cast<uint32_t>(em & 0x3ff) << 13));
  const float mag = bits_to_f32(em << 13) * 0x1p112f;
  return bits_to_f32(sign | f32_to_bits(mag));
}

inline uint16_t f32_to_f16(float f) {
  // Round to nearest even, like the F16C instruction.
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (ax >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (ax < 0x38800000) {  // subnormal or zero in half
    const float r = bits_to_f32(ax) + 0.5f;  // aligns the half subnormal bits at the bottom
    return static_cast<uint16_t>(sign | (f32_to_bits(r) - f32_to_bits(0.5f)));
  }
  const uint32_t mant_odd = (ax >> 13) & 1;
  ax += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (ax >> 13));
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace duet
