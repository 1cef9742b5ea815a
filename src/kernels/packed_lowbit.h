// Packed layouts (packed_gemm.h) of the types that keep their own bit width
// in 16-row groups: IQ4_NL, Q5_0, Q5_1 (32-element blocks, run by the same
// kernels as Q4_0) and IQ4_XS, Q2_K, Q3_K (256-element super-blocks). Each
// reads about as many bytes per weight as the file (Q3_K: 3.6 % more, its
// 6-bit scales widened to bytes; IQ4_XS: 1.5 % more), where packing them as
// Q8_0 read 8.5 bits per weight.
//
// Per 16-row group, per block in order (offsets in bytes):
//   IQ4_NL: 16 x f16 d, then 4 nibble lines of 64 bytes as Q4_0's (line j:
//           row r's bytes at 4r.., low nibbles elements 4j.., high 16 + 4j..),
//           holding the level indices; the kernel looks them up (+128, as u8).
//   Q5_0:   as IQ4_NL with the low 4 bits of the levels 0..31, then 8 masks
//           of 64 bits: mask c, bit 4r + i is the fifth bit of row r's
//           element 4c + i (the byte a 64-byte vector of the kernel holds
//           there), added as 16 under the mask.
//   Q5_1:   16 x f16 d, 16 x f16 m, then as Q5_0's nibbles and masks.
// Per 16-row group, per 256-element super-block in order:
//   IQ4_XS: 16 x f16 d, the 8 sub-block scales (ls - 32) as [8][16 rows]
//           int8, then per sub-block of 32 its 4 nibble lines as IQ4_NL's.
//   Q2_K:   16 x f16 d, 16 x f16 dmin, the file's scale bytes (sc | m << 4)
//           as [8 pairs][16 rows][2] (sub-blocks 2p, 2p + 1 side by side,
//           which widen to the int16 pairs of vpdpwssd), then per sub-block
//           j of 16 one line of 64 bytes: row r's bytes at 4r + i, bits 2s
//           of byte i element 16j + 4s + i.
//   Q3_K:   16 x f16 d, the signed scales as Q2_K's pairs (int8), then per
//           pair p of sub-blocks (32 elements) three lines a, b, c of 64
//           bytes holding the levels q + 4 (0..7): byte 4r + i of each is
//           row r's, and level v (0..7) of it is element 32p + 4v + i, as
//           the 8 vectors of the kernels meet activation bytes 4v... Levels
//           0..5 sit whole, 3 bits each: v0, v1 in a's bits 0-2, 3-5; v2, v3
//           in b's; v4, v5 in c's. v6 is a's bits 6-7 with c's bit 6 as its
//           third bit, v7 b's bits 6-7 with c's bit 7. Every level comes out
//           by shifts and masks (16-bit shifts are safe: each mask keeps
//           only bits of the byte's own), no per-vector mask registers.
//
// Sums (the reference's order, which every kernel keeps):
//   32-element blocks: as Q8_0 / Q4_0 (packed_gemm.h) with the offsets 128
//     (IQ4_NL's looked-up levels), 16 (Q5_0); Q5_1 starts its int32 sum at 0
//     and adds its min per block, part = fma(-m, float(start), part) with
//     start = -sum(x) (offset 1).
//   IQ4_XS: everything per super-block in one int32: per sub-block j of 32,
//     isum_j from start_j (offset 128), which is sum(level * x) exactly, and
//     total += ls_j * isum_j; then v = d * float(total), acc = fma(v, d_x,
//     acc). |level| <= 127 and |x| <= 127 give |isum_j| <= 32 * 127 * 127 =
//     516128, |ls_j| <= 32 gives 16516096 per sub-block, and 8 of them stay
//     under 2^27 (132128768, a 16th of int32's range; a test reaches it).
//     float(total) may round past 2^24, the same rounding at every level.
//     (The AVX2 kernel reaches the same integers without start: its sign
//     trick sums level * x directly.)
//   Q2_K, Q3_K: everything per super-block in one int32: per sub-block of 16,
//     s = sum(q * x) (q unsigned: Q2_K 0..3, Q3_K 0..7), isum += s * sc_j; the
//     activation block's start holds the sums of its two halves as int16
//     (kHalfSums), so the offset term is sum_j c_j * S_j by vpdpwssd (Q2_K:
//     msum with c = m; Q3_K: into isum with c = -4 * sc). Then Q2_K
//     v = fma(-dmin, float(msum), d * float(isum)), Q3_K v = d * float(isum);
//     acc = fma(v, d_x, acc). |isum| < 2^23, so every float(isum) is exact.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace duet::packed_lowbit {

inline constexpr int64_t kD = 32;          // 16 x f16
inline constexpr int64_t kNibbles = 256;   // 4 lines of 64 bytes: 16 rows x 32 elements
inline constexpr int64_t kMasks = 64;      // 8 masks of 64 bits
inline constexpr int64_t kPairs = 256;     // [8 pairs][16 rows][2] bytes
inline constexpr int64_t kCrumbs = 1024;   // 16 lines of 64 bytes

inline constexpr int64_t kIq4NlBytes = kD + kNibbles;
inline constexpr int64_t kQ5_0Bytes = kD + kNibbles + kMasks;
inline constexpr int64_t kQ5_1Bytes = 2 * kD + kNibbles + kMasks;
inline constexpr int64_t kIq4XsHead = kD + 8 * 16;
inline constexpr int64_t kIq4XsBytes = kIq4XsHead + 8 * kNibbles;
inline constexpr int64_t kQ2KHead = 2 * kD + kPairs;
inline constexpr int64_t kQ2KBytes = kQ2KHead + kCrumbs;
inline constexpr int64_t kQ3KHead = kD + kPairs;
inline constexpr int64_t kQ3PairBytes = 3 * 64;  // a pair of sub-blocks' three lines
inline constexpr int64_t kQ3KBytes = kQ3KHead + 8 * kQ3PairBytes;

// The activations' kHalfSums form of start: the sums of elements 0..15 and
// 16..31 as int16, low and high half (|sum| <= 16 * 127).
inline int32_t half_sums(int32_t lo, int32_t hi) {
  return static_cast<int32_t>(static_cast<uint16_t>(lo) | static_cast<uint32_t>(hi) << 16);
}

bool handles(DType t);
// Elements per block: 32 or 256.
int64_t block_elems(DType t);
// Bytes of one block (or super-block) of one 16-row group.
int64_t group_block_bytes(DType t);
// PackedKernels::offset of t.
int act_offset(DType t);

void pack(const TensorView& w, uint8_t* out, int64_t group_begin, int64_t group_end);
void unpack_row(const TensorView& w, int64_t row, uint8_t* out);
void reference(DType t, int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
               int64_t n_tok, float* y, int64_t y_stride);

}  // namespace duet::packed_lowbit
