// FP8 E4M3 as the OCP spec and PyTorch's float8_e4m3fn define it: 1 sign,
// 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal; no
// infinities, and only S.1111.111 is NaN, so the largest value is 448.
#pragma once

#include <cmath>
#include <cstdint>

namespace duet {

inline float e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0xF, man = b & 0x7;
  float v;
  if (exp == 0xF && man == 0x7) v = NAN;
  else if (exp == 0) v = std::ldexp(static_cast<float>(man), -9);  // man/8 * 2^-6
  else v = std::ldexp(static_cast<float>(8 + man), exp - 10);      // (1 + man/8) * 2^(exp-7)
  return (b & 0x80) ? -v : v;
}

}  // namespace duet
