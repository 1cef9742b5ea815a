#include "kernels/packed_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/packed_lowbit.h"
#include "kernels/quant.h"
#include "kernels/registry.h"

namespace duet {
namespace {

constexpr int64_t kScaleBytes = kPackRows * 2;

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Bytes of one block of one 16-row group: the 16 scales and the quants.
int64_t group_block_bytes(DType t) { return kScaleBytes + kPackRows * (t == DType::Q8_0 ? kQK32 : kQK32 / 2); }

template <class Block>
void pack_groups(const TensorView& w, uint8_t* out, bool q8, int64_t g0, int64_t g1) {
  const int64_t nb = w.ne[0] / kQK32;
  const int chunks = q8 ? 8 : 4;  // of 4 bytes of each row
  out += g0 * nb * group_block_bytes(w.dtype);
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < kPackRows; ++r) {
        const Block& blk = reinterpret_cast<const Block*>(w.row(g * kPackRows + r))[b];
        std::memcpy(out + 2 * r, &blk.d, 2);
        for (int c = 0; c < chunks; ++c) {
          uint8_t* dst = out + kScaleBytes + (c * kPackRows + r) * 4;
          std::memcpy(dst, reinterpret_cast<const uint8_t*>(blk.qs) + 4 * c, 4);
          if (q8)
            for (int i = 0; i < 4; ++i) dst[i] ^= 0x80;  // signed -> unsigned + 128
        }
      }
      out += kScaleBytes + kPackRows * chunks * 4;
    }
}

// The 16 rows of each group interleaved by element, as elements of
// kBytes bytes (a copy of that fixed size compiles to one load or store; a
// std::memcpy of a size known only at run time was a call per element, most
// of an F16 model's packing).
template <size_t kBytes>
void interleave_groups(const TensorView& w, uint8_t* out, int64_t g0, int64_t g1) {
  const int64_t k = w.ne[0];
  for (int64_t g = g0; g < g1; ++g, out += k * kPackRows * static_cast<int64_t>(kBytes)) {
    const uint8_t* src[kPackRows];
    for (int r = 0; r < kPackRows; ++r) src[r] = w.row(g * kPackRows + r);
    for (int64_t i = 0; i < k; ++i)
      for (int r = 0; r < kPackRows; ++r)
        std::memcpy(out + (i * kPackRows + r) * static_cast<int64_t>(kBytes), src[r] + i * static_cast<int64_t>(kBytes), kBytes);
  }
}

void pack_float_groups(const TensorView& w, uint8_t* out, int64_t g0, int64_t g1) {
  if (w.dtype == DType::F32) return interleave_groups<4>(w, out + g0 * w.ne[0] * kPackRows * 4, g0, g1);
  interleave_groups<2>(w, out + g0 * w.ne[0] * kPackRows * 2, g0, g1);
}

void float_reference(DType t, int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                     int64_t n_tok, float* y, int64_t y_stride) {
  const int64_t elem = t == DType::F32 ? 4 : 2;
  // The type's own scalar widening, one element at a time.
  const auto to_float = kernels_at(CpuLevel::kScalar).type(t)->to_float;
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t tok = 0; tok < n_tok; ++tok)
      for (int r = 0; r < kPackRows; ++r) {
        const auto* xt = reinterpret_cast<const float*>(x + tok * x_stride);
        float acc[2] = {0.0f, 0.0f};  // even and odd k
        for (int64_t i = 0; i < k; ++i) {
          float wi;
          to_float(w + ((g * k + i) * kPackRows + r) * elem, &wi, 1);
          acc[i & 1] = std::fma(wi, xt[i], acc[i & 1]);
        }
        y[tok * y_stride + g * kPackRows + r] = acc[0] + acc[1];
      }
}

// Q4_K's super-block must be one activation group (one d_x per super-block).
static_assert(kActGroupBlocks * kQK32 == kQKK);
constexpr int64_t kK4Head = 4 * kPackRows + 2 * 8 * kPackRows;  // d, dmin, scales, mins
constexpr int64_t kK4Bytes = kK4Head + kPackRows * kQKK / 2;     // per group and super-block

// Where row r's min of sub-block j sits in a packed super-block: pairs of
// sub-blocks side by side per row.
int64_t k4_min_offset(int j, int r) { return 4 * kPackRows + 8 * kPackRows + ((j / 2) * kPackRows + r) * 2 + j % 2; }

void pack_k4_groups(const TensorView& w, uint8_t* out, int64_t g0, int64_t g1) {
  const int64_t nsb = w.ne[0] / kQKK;
  out += g0 * nsb * kK4Bytes;
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t b = 0; b < nsb; ++b, out += kK4Bytes)
      for (int r = 0; r < kPackRows; ++r) {
        const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w.row(g * kPackRows + r))[b];
        std::memcpy(out + 2 * r, &blk.d, 2);
        std::memcpy(out + 2 * kPackRows + 2 * r, &blk.dmin, 2);
        for (int j = 0; j < 8; ++j)
          k4_scale_min(blk.scales, j, out + 4 * kPackRows + j * kPackRows + r, out + k4_min_offset(j, r));
        for (int c = 0; c < 4; ++c)
          for (int s = 0; s < 8; ++s)
            std::memcpy(out + kK4Head + ((c * 8 + s) * kPackRows + r) * 4, blk.qs + 32 * c + 4 * s, 4);
      }
}

// Token tok's block b of interleaved activations.
const PackedActBlock& act_block(const uint8_t* x, size_t x_stride, int64_t tok, int64_t b) {
  return *reinterpret_cast<const PackedActBlock*>(x + static_cast<size_t>(b) * x_stride +
                                                  static_cast<size_t>(tok) * sizeof(PackedActBlock));
}

void k4_reference(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t n_tok,
                  float* y, int64_t y_stride) {
  const int64_t nsb = k / kQKK;
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t tok = 0; tok < n_tok; ++tok)
      for (int r = 0; r < kPackRows; ++r) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nsb; ++b) {
          const uint8_t* blk = w + (g * nsb + b) * kK4Bytes;
          uint16_t dh, mh;
          std::memcpy(&dh, blk + 2 * r, 2);
          std::memcpy(&mh, blk + 2 * kPackRows + 2 * r, 2);
          float part = 0.0f;
          int32_t msum = 0;
          for (int j = 0; j < 8; ++j) {
            const PackedActBlock& a = act_block(x, x_stride, tok, b * 8 + j);
            int32_t isum = 0;
            for (int i = 0; i < kQK32; ++i) {
              const uint8_t byte = blk[kK4Head + (((j / 2) * 8 + i / 4) * kPackRows + r) * 4 + i % 4];
              isum += (j % 2 ? byte >> 4 : byte & 0x0F) * a.qs[i];
            }
            part = std::fma(static_cast<float>(isum), f16_to_f32(dh) * blk[4 * kPackRows + j * kPackRows + r], part);
            msum += blk[k4_min_offset(j, r)] * pair_sum(a.start, j);
          }
          // The super-block is one activation group: one scale d_x.
          const float v = std::fma(f16_to_f32(mh), static_cast<float>(msum), part);
          acc = std::fma(v, act_block(x, x_stride, tok, b * 8).d, acc);
        }
        y[tok * y_stride + g * kPackRows + r] = acc;
      }
}

// Unsigned weight element i (0..31) of row r of one packed block's quants.
uint8_t packed_element(DType t, const uint8_t* qs, int r, int i) {
  if (t == DType::Q8_0) return qs[(i / 4 * kPackRows + r) * 4 + i % 4];
  const int j = i % 16;  // byte j of the original qs: element j low, j + 16 high
  const uint8_t byte = qs[(j / 4 * kPackRows + r) * 4 + j % 4];
  return i < 16 ? byte & 0x0F : byte >> 4;
}

}  // namespace

bool packable(const TensorView& w) {
  const int64_t block = is_float(w.dtype)                ? 1
                        : w.dtype == DType::Q4_K            ? kQKK
                        : packed_lowbit::handles(w.dtype) ? packed_lowbit::block_elems(w.dtype)
                                                          : kQK32;
  return !w.packed && w.n_dims == 2 && kernels().packed(w.dtype) && w.ne[0] > 0 && w.ne[0] % block == 0 &&
         w.ne[1] % kPackRows == 0 && w.ne[1] > 0;
}

size_t packed_bytes(const TensorView& w) {
  if (packed_lowbit::handles(w.dtype))
    return static_cast<size_t>(w.rows() / kPackRows * (w.ne[0] / packed_lowbit::block_elems(w.dtype)) *
                               packed_lowbit::group_block_bytes(w.dtype));
  if (w.dtype != DType::Q4_K) return w.nbytes;
  return static_cast<size_t>(w.rows() / kPackRows * (w.ne[0] / kQKK) * kK4Bytes);
}

void pack_weights(const TensorView& w, uint8_t* out, int64_t group_begin, int64_t group_end) {
  if (is_float(w.dtype)) return pack_float_groups(w, out, group_begin, group_end);
  if (w.dtype == DType::Q4_K) return pack_k4_groups(w, out, group_begin, group_end);
  if (packed_lowbit::handles(w.dtype)) return packed_lowbit::pack(w, out, group_begin, group_end);
  if (w.dtype == DType::Q8_0)
    pack_groups<BlockQ8_0>(w, out, true, group_begin, group_end);
  else
    pack_groups<BlockQ4_0>(w, out, false, group_begin, group_end);
}

void pack_weights(const TensorView& w, uint8_t* out) { pack_weights(w, out, 0, w.rows() / kPackRows); }

size_t packed_act_row_bytes(int64_t k) { return static_cast<size_t>(k / kQK32) * sizeof(PackedActBlock); }

void quantize_packed_act(const float* x, uint8_t* out, int64_t k, int offset, size_t block_stride) {
  const auto block = [&](int64_t b) -> PackedActBlock& {
    return *reinterpret_cast<PackedActBlock*>(out + static_cast<size_t>(b) * block_stride);
  };
  const int64_t nb = k / kQK32;
  for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
    const int64_t g1 = std::min(nb, g0 + kActGroupBlocks);
    float amax = 0.f;
    for (int64_t i = g0 * kQK32; i < g1 * kQK32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    for (int64_t b = g0; b < g1; ++b) {
      PackedActBlock& y = block(b);
      int32_t sum[2] = {0, 0};  // of each half
      for (int i = 0; i < kQK32; ++i) {
        y.qs[i] = static_cast<int8_t>(std::round(x[b * kQK32 + i] * id));
        sum[i / 16] += y.qs[i];
      }
      y.d = f16_to_f32(f32_to_f16(d));
      y.start = offset == kHalfSums ? packed_lowbit::half_sums(sum[0], sum[1])
                                    : -(offset == kPairSums ? 1 : offset) * (sum[0] + sum[1]);
    }
  }
  if (offset == kPairSums) pair_block_sums(out, nb, block_stride);
}

void pair_block_sums(uint8_t* out, int64_t nb, size_t block_stride) {
  const auto start = [&](int64_t b) -> int32_t& {
    return reinterpret_cast<PackedActBlock*>(out + static_cast<size_t>(b) * block_stride)->start;
  };
  for (int64_t b = 0; b < nb; b += 2) {
    const int32_t high = b + 1 < nb ? start(b + 1) : 0;
    start(b) = pair_start(start(b), high);
    if (b + 1 < nb) start(b + 1) = start(b);
  }
}

void packed_gemm_reference(DType t, int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                           size_t x_stride, int64_t n_tok, float* y, int64_t y_stride) {
  if (is_float(t)) return float_reference(t, k, w, n_groups, x, x_stride, n_tok, y, y_stride);
  if (t == DType::Q4_K) return k4_reference(k, w, n_groups, x, x_stride, n_tok, y, y_stride);
  if (packed_lowbit::handles(t)) return packed_lowbit::reference(t, k, w, n_groups, x, x_stride, n_tok, y, y_stride);
  const int64_t nb = k / kQK32, gb = group_block_bytes(t);
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t tok = 0; tok < n_tok; ++tok)
      for (int r = 0; r < kPackRows; ++r) {
        const auto xb = [&](int64_t b) -> const PackedActBlock& { return act_block(x, x_stride, tok, b); };
        float acc = 0.0f;
        for (int64_t g0 = 0; g0 < nb; g0 += kActGroupBlocks) {
          float part = 0.0f;
          for (int64_t b = g0; b < std::min(nb, g0 + kActGroupBlocks); ++b) {
            const uint8_t* blk = w + (g * nb + b) * gb;
            uint16_t dh;
            std::memcpy(&dh, blk + 2 * r, 2);
            int32_t isum = xb(b).start;
            for (int i = 0; i < kQK32; ++i) isum += packed_element(t, blk + kScaleBytes, r, i) * xb(b).qs[i];
            part = std::fma(static_cast<float>(isum), f16_to_f32(dh), part);
          }
          acc = std::fma(part, xb(g0).d, acc);
        }
        y[tok * y_stride + g * kPackRows + r] = acc;
      }
}

namespace {

// Q4_K's 12 bytes of 6-bit scales and mins from the 8 unpacked pairs
// (k4_scale_min's inverse).
void k4_pack_scales(const uint8_t* sc, const uint8_t* m, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

void unpack_k4_row(const TensorView& w, int64_t row, uint8_t* out) {
  const int64_t nsb = w.ne[0] / kQKK, g = row / kPackRows;
  const int r = static_cast<int>(row % kPackRows);
  const auto* src = static_cast<const uint8_t*>(w.data) + g * nsb * kK4Bytes;
  for (int64_t b = 0; b < nsb; ++b, src += kK4Bytes) {
    BlockQ4_K& blk = reinterpret_cast<BlockQ4_K*>(out)[b];
    std::memcpy(&blk.d, src + 2 * r, 2);
    std::memcpy(&blk.dmin, src + 2 * kPackRows + 2 * r, 2);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = src[4 * kPackRows + j * kPackRows + r];
      m[j] = src[k4_min_offset(j, r)];
    }
    k4_pack_scales(sc, m, blk.scales);
    for (int c = 0; c < 4; ++c)
      for (int s = 0; s < 8; ++s) std::memcpy(blk.qs + 32 * c + 4 * s, src + kK4Head + ((c * 8 + s) * kPackRows + r) * 4, 4);
  }
}

template <class Block>
void unpack_blocks_row(const TensorView& w, int64_t row, uint8_t* out, bool q8) {
  const int64_t nb = w.ne[0] / kQK32, g = row / kPackRows;
  const int r = static_cast<int>(row % kPackRows), chunks = q8 ? 8 : 4;
  const auto* src = static_cast<const uint8_t*>(w.data) + g * nb * group_block_bytes(w.dtype);
  for (int64_t b = 0; b < nb; ++b, src += kScaleBytes + kPackRows * chunks * 4) {
    Block& blk = reinterpret_cast<Block*>(out)[b];
    std::memcpy(&blk.d, src + 2 * r, 2);
    for (int c = 0; c < chunks; ++c) {
      auto* dst = reinterpret_cast<uint8_t*>(blk.qs) + 4 * c;
      std::memcpy(dst, src + kScaleBytes + (c * kPackRows + r) * 4, 4);
      if (q8)
        for (int i = 0; i < 4; ++i) dst[i] ^= 0x80;
    }
  }
}

}  // namespace

void unpack_row(const TensorView& w, int64_t row, uint8_t* out) {
  if (is_float(w.dtype)) {
    const int64_t elem = w.dtype == DType::F32 ? 4 : 2, k = w.ne[0], g = row / kPackRows;
    const auto* src = static_cast<const uint8_t*>(w.data) + (g * k * kPackRows + row % kPackRows) * elem;
    for (int64_t i = 0; i < k; ++i) std::memcpy(out + i * elem, src + i * kPackRows * elem, static_cast<size_t>(elem));
    return;
  }
  if (w.dtype == DType::Q4_K) return unpack_k4_row(w, row, out);
  if (packed_lowbit::handles(w.dtype)) return packed_lowbit::unpack_row(w, row, out);
  if (w.dtype == DType::Q8_0) return unpack_blocks_row<BlockQ8_0>(w, row, out, true);
  unpack_blocks_row<BlockQ4_0>(w, row, out, false);
}

}  // namespace duet
