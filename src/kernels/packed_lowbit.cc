#include "kernels/packed_lowbit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/packed_gemm.h"

namespace duet::packed_lowbit {
namespace {

constexpr int kRows = kPackRows;

bool is_k(DType t) { return t == DType::IQ4_XS || t == DType::Q2_K || t == DType::Q3_K; }

// ---- the file's blocks as unsigned levels ----

uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

template <class Block>
void put_levels5(const uint8_t* u, Block& b) {
  uint32_t bits = 0;
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>((u[i] & 0xF) | (u[i + 16] & 0xF) << 4);
  for (int e = 0; e < kQK32; ++e) bits |= static_cast<uint32_t>(u[e] >> 4) << e;
  for (int i = 0; i < 4; ++i) b.qh[i] = static_cast<uint8_t>(bits >> (8 * i));
}

// Q2_K / Q3_K: a super-block's 256 levels in element order, from the 2-bit
// fields (element 128h + 32s + l: bits 2s of qs[32h + l]) and, for Q3_K, the
// third bits (bit 4h + s of hmask[l]; hmask null for Q2_K). Walked in that
// order, the inner loop is 32 bytes with fixed shifts, which the compiler
// vectorizes: one element at a time, with its divisions, was ~8 cycles each
// and most of a Q3_K model's load.
void levels_k_low(const uint8_t* qs, const uint8_t* hmask, uint8_t* u) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s) {
      uint8_t* out = u + 128 * h + 32 * s;
      for (int l = 0; l < 32; ++l) out[l] = static_cast<uint8_t>((qs[32 * h + l] >> (2 * s)) & 3);
      if (hmask)
        for (int l = 0; l < 32; ++l) out[l] |= static_cast<uint8_t>(((hmask[l] >> (4 * h + s)) & 1) << 2);
    }
}

void put_crumbs2(const uint8_t* u, uint8_t* qs) {
  std::memset(qs, 0, kQKK / 4);
  for (int e = 0; e < kQKK; ++e) qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((u[e] & 3) << (2 * ((e / 32) % 4)));
}

// ---- the packed pieces, row r of a group ----

// 4 nibble lines from a block's 16 bytes of nibbles (file order: byte j holds
// element j low, 16 + j high), which is the lines' order too: row r's bytes
// 4j.. go to line j as they are.
void put_nibbles(const uint8_t* qs, int r, uint8_t* lines) {
  for (int j = 0; j < 4; ++j) std::memcpy(lines + (j * kRows + r) * 4, qs + 4 * j, 4);
}

int get_nibble(const uint8_t* lines, int r, int e) {
  const int j = e % 16;
  const uint8_t byte = lines[(j / 4 * kRows + r) * 4 + j % 4];
  return e < 16 ? byte & 0xF : byte >> 4;
}

// 8 masks of 64 bits from a 5-bit block's qh (bit e: element e's fifth
// bit): mask c, bit 4r + i is element 4c + i's. Row r's 4 bits of a mask
// share a byte, so they go in as one nibble (a branch per element on these
// random bits spent most of a Q5 model's load in mispredictions).
void put_masks(const uint8_t* qh, int r, uint8_t* masks) {
  const uint32_t bits = le32(qh);
  for (int c = 0; c < 8; ++c) masks[c * 8 + r / 2] |= static_cast<uint8_t>(((bits >> (4 * c)) & 0xF) << (4 * (r % 2)));
}

int get_mask(const uint8_t* masks, int r, int e) {
  const int pos = 4 * r + e % 4;
  return (masks[(e / 4) * 8 + pos / 8] >> (pos % 8)) & 1;
}

// One 64-byte line of 16 elements (0..3) per row: bits 2s of byte 4r + i hold element 4s + i.
void put_crumbs(const uint8_t* u, int r, uint8_t* line) {
  for (int i = 0; i < 4; ++i) {
    uint8_t byte = 0;
    for (int s = 0; s < 4; ++s) byte |= static_cast<uint8_t>((u[4 * s + i] & 3) << (2 * s));
    line[4 * r + i] = byte;
  }
}

int get_crumb(const uint8_t* line, int r, int e) { return (line[4 * r + e % 4] >> (2 * (e / 4))) & 3; }

// Q3_K's three lines of a pair of sub-blocks (packed_lowbit.h): row r's 32
// levels (0..7), element 4v + i as level v of bytes 4r + i.
void put_levels3(const uint8_t* u, int r, uint8_t* lines) {
  for (int i = 0; i < 4; ++i) {
    const auto lv = [&](int v) { return u[4 * v + i]; };
    lines[4 * r + i] = static_cast<uint8_t>(lv(0) | lv(1) << 3 | (lv(6) & 3) << 6);
    lines[64 + 4 * r + i] = static_cast<uint8_t>(lv(2) | lv(3) << 3 | (lv(7) & 3) << 6);
    lines[128 + 4 * r + i] = static_cast<uint8_t>(lv(4) | lv(5) << 3 | (lv(6) >> 2) << 6 | (lv(7) >> 2) << 7);
  }
}

int get_level3(const uint8_t* lines, int r, int e) {
  const int v = e / 4, at = 4 * r + e % 4;
  if (v < 6) return (lines[64 * (v / 2) + at] >> (3 * (v % 2))) & 7;
  const int h = v - 6;  // a's or b's top bits, c's bit 6 + h
  return lines[64 * h + at] >> 6 | ((lines[128 + at] >> (6 + h)) & 1) << 2;
}

uint16_t get_f16(const uint8_t* p, int r) {
  uint16_t h;
  std::memcpy(&h, p + 2 * r, 2);
  return h;
}

// Byte offset in the pairs of row r's sub-block j.
int64_t pair_at(int j, int r) { return ((j / 2) * kRows + r) * 2 + j % 2; }

// ---- packing: one row's block b into its group's block ----

void pack_block(DType t, const uint8_t* row, int64_t b, int r, uint8_t* out) {
  switch (t) {
    case DType::IQ4_NL: {
      const auto& blk = reinterpret_cast<const BlockIQ4_NL*>(row)[b];
      std::memcpy(out + 2 * r, &blk.d, 2);
      return put_nibbles(blk.qs, r, out + kD);
    }
    case DType::Q5_0: {
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
      std::memcpy(out + 2 * r, &blk.d, 2);
      put_nibbles(blk.qs, r, out + kD);
      return put_masks(blk.qh, r, out + kD + kNibbles);
    }
    case DType::Q5_1: {
      const auto& blk = reinterpret_cast<const BlockQ5_1*>(row)[b];
      std::memcpy(out + 2 * r, &blk.d, 2);
      std::memcpy(out + kD + 2 * r, &blk.m, 2);
      put_nibbles(blk.qs, r, out + 2 * kD);
      return put_masks(blk.qh, r, out + 2 * kD + kNibbles);
    }
    case DType::IQ4_XS: {
      const auto& blk = reinterpret_cast<const BlockIQ4_XS*>(row)[b];
      std::memcpy(out + 2 * r, &blk.d, 2);
      for (int j = 0; j < 8; ++j) {
        out[kD + j * kRows + r] = static_cast<uint8_t>(static_cast<int8_t>(iq4_xs_scale(blk, j)));
        put_nibbles(blk.qs + 16 * j, r, out + kIq4XsHead + j * kNibbles);
      }
      return;
    }
    case DType::Q2_K: {
      const auto& blk = reinterpret_cast<const BlockQ2_K*>(row)[b];
      std::memcpy(out + 2 * r, &blk.d, 2);
      std::memcpy(out + kD + 2 * r, &blk.dmin, 2);
      uint8_t u[kQKK];
      levels_k_low(blk.qs, nullptr, u);
      for (int j = 0; j < 16; ++j) {
        out[2 * kD + pair_at(j, r)] = blk.scales[j];
        put_crumbs(u + 16 * j, r, out + kQ2KHead + 64 * j);
      }
      return;
    }
    case DType::Q3_K: {
      const auto& blk = reinterpret_cast<const BlockQ3_K*>(row)[b];
      std::memcpy(out + 2 * r, &blk.d, 2);
      int8_t sc[16];
      q3_K_scales(blk.scales, sc);
      for (int j = 0; j < 16; ++j) out[kD + pair_at(j, r)] = static_cast<uint8_t>(sc[j]);
      uint8_t u[kQKK];
      levels_k_low(blk.qs, blk.hmask, u);
      for (int p = 0; p < 8; ++p) put_levels3(u + 32 * p, r, out + kQ3KHead + kQ3PairBytes * p);
      return;
    }
    default:
      return;
  }
}

// ---- unpacking: row r's block back in the file's layout ----

void unpack_block(DType t, const uint8_t* in, int r, uint8_t* row, int64_t b) {
  uint8_t u[kQKK];
  switch (t) {
    case DType::IQ4_NL: {
      auto& blk = reinterpret_cast<BlockIQ4_NL*>(row)[b];
      blk.d = get_f16(in, r);
      for (int i = 0; i < 16; ++i)
        blk.qs[i] = static_cast<uint8_t>(get_nibble(in + kD, r, i) | get_nibble(in + kD, r, i + 16) << 4);
      return;
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool affine = t == DType::Q5_1;
      const uint8_t* lines = in + (affine ? 2 : 1) * kD;
      for (int e = 0; e < kQK32; ++e)
        u[e] = static_cast<uint8_t>(get_nibble(lines, r, e) | get_mask(lines + kNibbles, r, e) << 4);
      if (affine) {
        auto& blk = reinterpret_cast<BlockQ5_1*>(row)[b];
        blk.d = get_f16(in, r);
        blk.m = get_f16(in + kD, r);
        return put_levels5(u, blk);
      }
      auto& blk = reinterpret_cast<BlockQ5_0*>(row)[b];
      blk.d = get_f16(in, r);
      return put_levels5(u, blk);
    }
    case DType::IQ4_XS: {
      auto& blk = reinterpret_cast<BlockIQ4_XS*>(row)[b];
      std::memset(&blk, 0, sizeof blk);
      blk.d = get_f16(in, r);
      for (int j = 0; j < 8; ++j) {
        const int ls = static_cast<int8_t>(in[kD + j * kRows + r]) + 32;
        blk.scales_l[j / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j % 2)));
        blk.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
        const uint8_t* lines = in + kIq4XsHead + j * kNibbles;
        for (int i = 0; i < 16; ++i)
          blk.qs[16 * j + i] = static_cast<uint8_t>(get_nibble(lines, r, i) | get_nibble(lines, r, i + 16) << 4);
      }
      return;
    }
    case DType::Q2_K: {
      auto& blk = reinterpret_cast<BlockQ2_K*>(row)[b];
      blk.d = get_f16(in, r);
      blk.dmin = get_f16(in + kD, r);
      for (int j = 0; j < 16; ++j) {
        blk.scales[j] = in[2 * kD + pair_at(j, r)];
        for (int e = 0; e < 16; ++e) u[16 * j + e] = static_cast<uint8_t>(get_crumb(in + kQ2KHead + 64 * j, r, e));
      }
      return put_crumbs2(u, blk.qs);
    }
    case DType::Q3_K: {
      auto& blk = reinterpret_cast<BlockQ3_K*>(row)[b];
      std::memset(&blk, 0, sizeof blk);
      blk.d = get_f16(in, r);
      for (int j = 0; j < 16; ++j) {
        const int v = static_cast<int8_t>(in[kD + pair_at(j, r)]) + 32;  // as q3_K_scales reads them
        blk.scales[j % 8] |= static_cast<uint8_t>((v & 0xF) << (4 * (j / 8)));
        blk.scales[8 + j % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (j / 4)));
      }
      for (int q = 0; q < kQKK; ++q) {
        u[q] = static_cast<uint8_t>(get_level3(in + kQ3KHead + kQ3PairBytes * (q / 32), r, q % 32));
        if (u[q] >> 2) blk.hmask[q % 32] |= static_cast<uint8_t>(1 << (4 * (q / 128) + (q / 32) % 4));
      }
      return put_crumbs2(u, blk.qs);
    }
    default:
      return;
  }
}

// ---- the scalar reference ----

const PackedActBlock& act(const uint8_t* x, size_t x_stride, int64_t tok, int64_t b) {
  return *reinterpret_cast<const PackedActBlock*>(x + static_cast<size_t>(b) * x_stride +
                                                  static_cast<size_t>(tok) * sizeof(PackedActBlock));
}

// The unsigned weight the kernels feed vpdpbusd for element e of a 32-block.
int weight32(DType t, const uint8_t* blk, int r, int e) {
  if (t == DType::IQ4_NL) return kIq4Levels[get_nibble(blk + kD, r, e)] + 128;
  const uint8_t* lines = blk + (t == DType::Q5_1 ? 2 : 1) * kD;
  return get_nibble(lines, r, e) | get_mask(lines + kNibbles, r, e) << 4;
}

float dot32(DType t, int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, int64_t tok, int r) {
  const int64_t nb = k / kQK32, gb = group_block_bytes(t);
  float acc = 0.0f;
  for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
    float part = 0.0f;
    for (int64_t b = g0; b < std::min(nb, g0 + kActGroupBlocks); ++b) {
      const uint8_t* blk = w + b * gb;
      const PackedActBlock& a = act(x, xs, tok, b);
      int32_t isum = t == DType::Q5_1 ? 0 : a.start;
      for (int e = 0; e < kQK32; ++e) isum += weight32(t, blk, r, e) * a.qs[e];
      part = std::fma(static_cast<float>(isum), f16_to_f32(get_f16(blk, r)), part);
      if (t == DType::Q5_1) part = std::fma(-f16_to_f32(get_f16(blk + kD, r)), static_cast<float>(a.start), part);
    }
    acc = std::fma(part, act(x, xs, tok, g0).d, acc);
  }
  return acc;
}

float dot_iq4_xs(int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, int64_t tok, int r) {
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const uint8_t* blk = w + b * kIq4XsBytes;
    int32_t total = 0;
    for (int j = 0; j < 8; ++j) {
      const PackedActBlock& a = act(x, xs, tok, 8 * b + j);
      int32_t isum = a.start;
      for (int e = 0; e < kQK32; ++e) isum += (kIq4Levels[get_nibble(blk + kIq4XsHead + j * kNibbles, r, e)] + 128) * a.qs[e];
      total += static_cast<int8_t>(blk[kD + j * kRows + r]) * isum;
    }
    const float v = f16_to_f32(get_f16(blk, r)) * static_cast<float>(total);
    acc = std::fma(v, act(x, xs, tok, 8 * b).d, acc);
  }
  return acc;
}

int16_t half_sum(int32_t start, int h) { return static_cast<int16_t>(static_cast<uint32_t>(start) >> (16 * h)); }

float dot_k_low(DType t, int64_t k, const uint8_t* w, const uint8_t* x, size_t xs, int64_t tok, int r) {
  const bool q3 = t == DType::Q3_K;
  const int64_t bytes = q3 ? kQ3KBytes : kQ2KBytes, head = q3 ? kQ3KHead : kQ2KHead;
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const uint8_t* blk = w + b * bytes;
    const uint8_t* pairs = blk + (q3 ? kD : 2 * kD);
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 16; ++j) {
      const PackedActBlock& a = act(x, xs, tok, 8 * b + j / 2);
      const uint8_t code = pairs[pair_at(j, r)];
      int32_t s = 0;
      for (int e = 0; e < 16; ++e) {
        const int q = q3 ? get_level3(blk + head + kQ3PairBytes * (j / 2), r, 16 * (j % 2) + e)
                         : get_crumb(blk + head + 64 * j, r, e);
        s += q * a.qs[16 * (j % 2) + e];
      }
      const int32_t S = half_sum(a.start, j % 2);
      if (q3) {
        const int sc = static_cast<int8_t>(code);
        isum += s * sc - 4 * sc * S;
      } else {
        isum += s * (code & 0xF);
        msum += (code >> 4) * S;
      }
    }
    const float d = f16_to_f32(get_f16(blk, r));
    const float v = q3 ? d * static_cast<float>(isum)
                       : std::fma(-f16_to_f32(get_f16(blk + kD, r)), static_cast<float>(msum), d * static_cast<float>(isum));
    acc = std::fma(v, act(x, xs, tok, 8 * b).d, acc);
  }
  return acc;
}

}  // namespace

bool handles(DType t) {
  return t == DType::IQ4_NL || t == DType::Q5_0 || t == DType::Q5_1 || is_k(t);
}

int64_t block_elems(DType t) { return is_k(t) ? kQKK : kQK32; }

int64_t group_block_bytes(DType t) {
  switch (t) {
    case DType::IQ4_NL: return kIq4NlBytes;
    case DType::Q5_0: return kQ5_0Bytes;
    case DType::Q5_1: return kQ5_1Bytes;
    case DType::IQ4_XS: return kIq4XsBytes;
    case DType::Q2_K: return kQ2KBytes;
    case DType::Q3_K: return kQ3KBytes;
    default: return 0;
  }
}

int act_offset(DType t) {
  switch (t) {
    case DType::IQ4_NL:
    case DType::IQ4_XS: return 128;
    case DType::Q5_0: return 16;
    case DType::Q5_1: return 1;
    default: return kHalfSums;
  }
}

void pack(const TensorView& w, uint8_t* out, int64_t g0, int64_t g1) {
  const int64_t nb = w.ne[0] / block_elems(w.dtype), gb = group_block_bytes(w.dtype);
  out += g0 * nb * gb;
  std::memset(out, 0, static_cast<size_t>((g1 - g0) * nb * gb));  // the masks are or-ed in
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t b = 0; b < nb; ++b, out += gb)
      for (int r = 0; r < kRows; ++r) pack_block(w.dtype, w.row(g * kRows + r), b, r, out);
}

void unpack_row(const TensorView& w, int64_t row, uint8_t* out) {
  const int64_t nb = w.ne[0] / block_elems(w.dtype), gb = group_block_bytes(w.dtype);
  const auto* in = static_cast<const uint8_t*>(w.data) + row / kRows * nb * gb;
  for (int64_t b = 0; b < nb; ++b) unpack_block(w.dtype, in + b * gb, static_cast<int>(row % kRows), out, b);
}

void reference(DType t, int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
               int64_t n_tok, float* y, int64_t y_stride) {
  const int64_t group = k / block_elems(t) * group_block_bytes(t);
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t tok = 0; tok < n_tok; ++tok)
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* gw = w + g * group;
        float v;
        if (t == DType::IQ4_XS)
          v = dot_iq4_xs(k, gw, x, x_stride, tok, r);
        else if (is_k(t))
          v = dot_k_low(t, k, gw, x, x_stride, tok, r);
        else
          v = dot32(t, k, gw, x, x_stride, tok, r);
        y[tok * y_stride + g * kRows + r] = v;
      }
}

}  // namespace duet::packed_lowbit
