// Quantized block layouts, byte for byte as GGUF files store them (ggml's
// block_* structs), so a mapped tensor can be read as an array of these.
// Scales marked f16 are IEEE half bits (core/half.h converts them).
#pragma once

#include <cstdint>

namespace duet {

inline constexpr int kQK32 = 32;   // elements per block of the 32-element types
inline constexpr int kQKK = 256;   // elements per super-block of the K-quants
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K/Q5_K

// x = qs[i] * d.
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[kQK32];
};

// Activation format of Q4_1: like Q8_0, plus s = d * sum(qs). As in ggml, s
// is f16, so it overflows for activations beyond ~2000 in magnitude.
struct BlockQ8_1 {
  uint16_t d;  // f16
  uint16_t s;  // f16
  int8_t qs[kQK32];
};

// x = (q - 8) * d. Byte j holds element j in its low nibble, element j+16 in
// its high nibble.
struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[kQK32 / 2];
};

// x = q * d + m; nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qs[kQK32 / 2];
};

// 8 sub-blocks of 32: x = d*sc[j]*q - dmin*m[j], sc and m 6-bit. scales[12]:
// for j < 4, scales[j] low 6 bits = sc[j] and scales[j+4] low 6 bits = m[j];
// for j >= 4, sc[j] = scales[j+4] low nibble | (scales[j-4] >> 6) << 4 and
// m[j] = scales[j+4] high nibble | (scales[j] >> 6) << 4. qs: each 32 bytes
// cover 64 elements, low nibbles the first 32, high nibbles the next 32.
struct BlockQ4_K {
  uint16_t d;     // f16, scale of the sub-block scales
  uint16_t dmin;  // f16, scale of the sub-block mins
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};

// As Q4_K with a fifth bit per element: in each 64-element chunk c, bit 2c of
// qh[l] is the high bit of element 64c+l, bit 2c+1 that of element 64c+32+l.
struct BlockQ5_K {
  uint16_t d;     // f16
  uint16_t dmin;  // f16
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6-bit. Per 128-element
// half h (ql += 64h, qh += 32h), for l < 32: element l = ql[l] low nibble,
// l+32 = ql[l+32] low, l+64 = ql[l] high, l+96 = ql[l+32] high; their high
// 2 bits are qh[l] bits 0-1, 2-3, 4-5, 6-7.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;  // f16
};

// Activation format of the K-quants: x = qs[i] * d, and bsums[j] = sum of
// qs[16j .. 16j+15] (the dot products use it to apply mins and offsets).
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
inline void k4_scale_min(const uint8_t* scales, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

}  // namespace duet
