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

// x = (q - 16) * d, q 5-bit: the low 4 bits as Q4_0's nibbles, the fifth bit
// of element i is bit i of qh (read as a little-endian uint32).
struct BlockQ5_0 {
  uint16_t d;  // f16
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};

// x = q * d + m; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};

// The 16 non-uniform levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl),
// denser near zero where trained weights cluster.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// x = d * kIq4Levels[q], q 4-bit; nibbles as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;  // f16
  uint8_t qs[kQK32 / 2];
};

// 8 sub-blocks of 32: x = d * (ls[j] - 32) * kIq4Levels[q], ls 6-bit: low 4
// bits the nibble j % 2 of scales_l[j / 2], high 2 bits bits 2j..2j+1 of
// scales_h. qs: 16 bytes per sub-block, nibbles as Q4_0.
struct BlockIQ4_XS {
  uint16_t d;  // f16
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

// 16 sub-blocks of 16: x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4),
// q 2-bit. qs: each 32 bytes cover 128 elements; element 128h + 32s + l
// (s < 4, l < 32) is bits 2s..2s+1 of qs[32h + l].
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;     // f16
  uint16_t dmin;  // f16
};

// 16 sub-blocks of 16: x = d * (sc[j] - 32) * (q - (h ? 0 : 4)), q 2-bit
// placed as Q2_K's; h of element 128h' + 32s + l is bit 4h' + s of hmask[l].
// sc 6-bit: low nibble j % 8 of scales[j % 8] (low for j < 8, high after),
// high 2 bits at bit 2 * (j / 4) of scales[8 + j % 4] (q3_K_scales).
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;  // f16
};

// 3.4375 bits per weight; kernels/quant_iq3.cc has the element rule.
struct BlockIQ3_S {
  uint16_t d;  // f16
  uint8_t qs[kQKK / 4];
  uint8_t qh[kQKK / 32];
  uint8_t signs[kQKK / 8];
  uint8_t scales[kQKK / 64];
};

// Ternary: x = d * (t - 1), t in {0, 1, 2}, four per byte. Element
// 128h + 32s + l is bits 2s..2s+1 of qs[32h + l].
struct BlockTQ2_0 {
  uint8_t qs[kQKK / 4];
  uint16_t d;  // f16
};

// Ternary, five trits per byte stored as ceil(v * 256 / 243) where v is the
// trits read as a base-3 number, first trit most significant; trit n of byte
// b is ((uint8)(b * 3^n) * 3) >> 8. qs[0..31] hold elements 32n + m (n < 5),
// qs[32..47] elements 160 + 16n + m, qh[0..3] (4 trits each, a zero fifth)
// elements 240 + 4n + j.
struct BlockTQ1_0 {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;  // f16
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
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockTQ2_0) == 66);
static_assert(sizeof(BlockTQ1_0) == 54);
static_assert(sizeof(BlockIQ3_S) == 110);
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

// The 16 signed 6-bit scales of a Q3_K block, each less 32.
inline void q3_K_scales(const uint8_t* packed, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = (packed[j % 8] >> (4 * (j / 8))) & 0xF;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// The 6-bit scale of sub-block j (0..7) of an IQ4_XS block, less 32.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace duet
