// Weights repacked at load time: Q8_0 and Q4_0 for the int8 dot units,
// F32 / F16 / BF16 for the fma units.
//
// In GGUF's layout a 32-element block of one row is one dot product: its
// int32 sum needs a float scale-and-add of its own, and the lanes of a
// vector hold parts of one row that must be summed across at the end. Four
// float operations per vpdpbusd cap such a kernel at ~14 % of the int8 peak.
// Here 16 rows are interleaved 4 bytes at a time, so one vector holds 4
// elements of each of 16 rows and one vpdpbusd with 4 broadcast activation
// bytes advances 16 row dots at once; a block then costs 8 vpdpbusd and 3
// float operations per token, the output of 16 rows is one vector store, and
// the matrix is one linear stream for decode.
//
// Layout, per group of 16 rows (groups in row order), per block b in order:
//   16 x f16 d      the 16 rows' scales of block b (32 bytes)
//   Q8_0: 8 chunks c, each 16 rows x 4 bytes: (q[r][4c + i] + 128) as u8
//   Q4_0: 4 chunks j, each 16 rows x 4 bytes: bytes 4j..4j+3 of row r's qs
//         (low nibbles = elements 4j.., high nibbles = elements 16 + 4j..)
//   Q4_K, per 256-element super-block instead: 16 x f16 d, 16 x f16 dmin,
//         the 8 sub-block scales as [8][16 rows] bytes, the 8 mins as
//         [4 pairs][16 rows][2] bytes (sub-blocks 2i and 2i + 1 side by side,
//         which widen to the int16 pairs of vpdpwssd; both unpacked from 6
//         bits: 64 bytes more than the file per group), then 4 chunks of 64
//         elements, each 8 x (16 rows x 4 bytes of the row's qs): low nibbles
//         sub-block 2c, high nibbles sub-block 2c + 1.
//   F32 / F16 / BF16: per element k, the 16 rows' values (16 x 4 or 2 bytes),
//   so one load widens to the vector an fma per token needs (no horizontal
//   sums; the register tile is 16 rows x 12 tokens). BF16 prefill where the
//   CPU has AVX512_BF16: one 64-byte load holds k and k + 1 of the 16 rows,
//   and one vpermw makes the (even, odd) dwords vdpbf16ps reads
//   (packed_gemm_bf16_avx512.cc; the layout is the same for every level).
// Otherwise the same bytes as the file's. IQ4_NL, Q5_0, Q5_1, IQ4_XS, Q2_K
// and Q3_K: packed_lowbit.h.
//
// Activations go in PackedActBlock form: int8 values, their scale as f32,
// and -offset * sum(q) so the weights' unsigned offset (128 or Q4_0's 8)
// comes off by starting each block's int32 sum there. One scale serves a
// group of kActGroupBlocks blocks (256 elements; fewer at the end of a row),
// as in the K-quants' Q8_K: the Q8_0/Q4_0 kernels then sum a group's blocks
// as part = fma(float(isum_b), d_w, part) and scale once per group,
// acc = fma(part, d_x, acc). A scale per 32 cost a multiply per block and
// token beside the 8 vpdpbusd, 10-15 % of the 16-token kernel.
//
// Every (row, token) dot is summed in that order however many tokens share
// the call: decode gets the bits it gets inside a batch. (Q4_K, whose
// super-block is one activation group: per sub-block j, part =
// fma(float(isum_j), d * sc_j, part), d * sc_j exact in f32; the mins' term
// in integers, msum = sum_j m_j * S_j (S_j = -sum(q) of block j, kPairSums);
// then acc = fma(fma(dmin, float(msum), part), d_x, acc). Float weights: two
// sums, of the even and of the odd k, each by fma in k order, then
// even + odd.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace duet {

inline constexpr int kPackRows = 16;
inline constexpr int64_t kActGroupBlocks = 8;

struct PackedActBlock {
  float d;
  int32_t start;  // -offset * sum(qs)
  int8_t qs[32];
};

// y[t * y_stride + r] for the n_groups * 16 rows starting at `w` (a group
// boundary) and n_tok tokens of k elements. Int8 activations are
// interleaved by block: token t's block b is the PackedActBlock at
// x + b * x_stride + t * sizeof(PackedActBlock), so a kernel reaches every
// token of a block from one pointer (16 row pointers had the compiler
// spilling). Float activations are rows, x_stride bytes apart.
using PackedGemm = void (*)(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                            size_t x_stride, int64_t n_tok, float* y, int64_t y_stride);

// PackedKernels::offset of the float types: their activations stay f32
// rows, not PackedActBlocks.
inline constexpr int kFloatActs = -1;
// PackedKernels::offset of Q2_K and Q3_K, whose sub-blocks are 16 elements:
// start holds the sums of the block's two halves as int16 (low: elements
// 0..15), packed_lowbit::half_sums.
inline constexpr int kHalfSums = -2;
// PackedKernels::offset of Q4_K, whose mins' term takes its sub-blocks two
// at a time (one int16 pair product each): blocks 2i and 2i + 1 both hold
// (-sum(q) of block 2i, -sum(q) of block 2i + 1) as int16, low the even
// block's (|sum| <= 32 * 127); a last unpaired block has 0 in its high half.
inline constexpr int kPairSums = -3;

// Block j's own -sum(q) from a kPairSums start.
inline int32_t pair_sum(int32_t start, int64_t j) {
  return j % 2 ? start >> 16 : static_cast<int16_t>(static_cast<uint16_t>(start));
}

// The kPairSums start of blocks 2i and 2i + 1 from their own -sum(q).
inline int32_t pair_start(int32_t even, int32_t odd) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(even)) | static_cast<uint32_t>(odd) << 16);
}

// The starts of a row's nb blocks (block_stride bytes apart from out), each
// -sum(q), rewritten as kPairSums pairs.
void pair_block_sums(uint8_t* out, int64_t nb, size_t block_stride);

struct PackedKernels {
  // The weights' unsigned offset, 128 (Q8_0, IQ4_NL, IQ4_XS), 16 (Q5_0) or
  // 8 (Q4_0), or 1 for Q5_1 (whose mins need sum(q) itself); or kFloatActs,
  // kHalfSums or kPairSums (Q4_K).
  int offset;
  PackedGemm gemm;
  // quantize_packed_act's result, faster (nullptr for the float types).
  void (*quantize)(const float* x, uint8_t* out, int64_t k, int offset, size_t block_stride);
};

// The packed kernels of each type that has them: AVX-512 for every type,
// AVX2 for Q8_0, Q4_0, Q4_K, IQ4_NL, Q5_0 and the float types (its other
// members are empty and not registered).
// A weight without them at the active level stays in file layout.
struct PackedTypeKernels {
  PackedKernels q8_0, q4_0, q4_K, f32, f16, bf16;
  PackedKernels iq4_nl, q5_0, q5_1, iq4_xs, q2_K, q3_K;
};
extern const PackedTypeKernels kPackedAvx2;
extern const PackedTypeKernels kPackedAvx512;

// BF16 weights at the AVX-512 level where the CPU has AVX512_BF16
// (packed_gemm_bf16_avx512.cc): batches of more than 12 tokens with
// k <= 4096 by vdpbf16ps, activations rounded to bf16 (not the reference's
// bits: within bf16 rounding of it); the rest by kPackedAvx512.bf16.
extern const PackedKernels kPackedAvx512Bf16Dot;
// Whether the registry takes kPackedAvx512Bf16Dot: the CPU has AVX512_BF16
// and DUET_BF16_DOT is "1" (off by default: bf16 activations move a BF16
// Mixtral's logits beyond the reference tests' BF16 tolerance).
bool bf16_dot_enabled();
// The vdpbf16ps path alone, any n_tok (needs AVX512_BF16).
void packed_gemm_bf16_dot(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                          int64_t n_tok, float* y, int64_t y_stride);

// Whether `w` can be packed and computed packed here: a matrix of a type
// with packed kernels, rows a multiple of 16 (and whole blocks of 32 for the
// quantized types).
bool packable(const TensorView& w);

// Bytes of w packed.
size_t packed_bytes(const TensorView& w);

// Writes w (file layout, packable) into `out` (packed_bytes(w)) packed:
// all of it, or only the 16-row groups [group_begin, group_end).
void pack_weights(const TensorView& w, uint8_t* out);
void pack_weights(const TensorView& w, uint8_t* out, int64_t group_begin, int64_t group_end);

// Row `row` of a packed matrix in its dtype's file layout: the exact
// inverse of pack_weights, so a tied embedding can be read from the head's
// packed copy and the file's copy let go.
void unpack_row(const TensorView& packed, int64_t row, uint8_t* out);

// Bytes of one token's activations of k elements; converts one token's
// row, writing its block b at out + b * block_stride (the scalar
// definition: Q8_0's quantizer, absmax / 127 rounded through f16 and rounding
// half away from zero, over groups of kActGroupBlocks blocks). For m tokens
// interleaved, token t goes to out + t * sizeof(PackedActBlock) with
// block_stride m * sizeof(PackedActBlock).
size_t packed_act_row_bytes(int64_t k);
void quantize_packed_act(const float* x, uint8_t* out, int64_t k, int offset, size_t block_stride);

// The scalar definition every packed kernel must equal bit for bit.
void packed_gemm_reference(DType t, int64_t k, const uint8_t* w, int64_t n_groups,
                           const uint8_t* x, size_t x_stride, int64_t n_tok, float* y,
                           int64_t y_stride);

}  // namespace duet
