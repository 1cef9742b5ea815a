#include "formats/block_pack.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"

namespace duet {
namespace {

// Byte j holds element j in its low nibble and element j + 16 in its high one.
void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kQK32 / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | (q[j + kQK32 / 2] & 0xF) << 4);
}

}  // namespace

BlockQ4_0 pack_q4_0(const uint8_t* q, uint16_t d) {
  BlockQ4_0 b;
  b.d = d;
  pack_nibbles(q, b.qs);
  return b;
}

BlockQ4_1 pack_q4_1(const uint8_t* q, uint16_t d, uint16_t m) {
  BlockQ4_1 b;
  b.d = d;
  b.m = m;
  pack_nibbles(q, b.qs);
  return b;
}

BlockQ8_0 quantize_q8_0(const float* x) {
  float amax = 0.0f;
  for (int i = 0; i < kQK32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ8_0 b;
  b.d = f32_to_f16(d);
  for (int i = 0; i < kQK32; ++i) b.qs[i] = static_cast<int8_t>(std::round(x[i] * id));
  return b;
}

}  // namespace duet
