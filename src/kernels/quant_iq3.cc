// IQ3_S: 256-element super-blocks of 8 sub-blocks of 32, each element
// d * (1 + 2 * s) * g * sign, with s a 4-bit scale per sub-block, g one of
// the odd magnitudes 1..15 and the sign its own bit. Magnitudes come four at
// a time from a codebook of 512 points of {1, 3, .., 15}^4, indexed by 9
// bits. duet reads IQ3_S and computes with it against Q8_K activations
// (this scalar dot, and quant_mix_simd.h's at the SIMD levels); it does not
// quantize to it.
#include <array>
#include <cstdint>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "kernels/quant_mix_kernels.h"

namespace duet {
namespace {

// The codebook as a set: bit n is set when the point whose magnitudes are
// (2 * (n % 8) + 1, 2 * (n / 8 % 8) + 1, 2 * (n / 64 % 8) + 1, 2 * (n / 512) + 1)
// belongs to it (element 0 first). Index i is the i-th point of the set in
// ascending n, the order the format numbers them in.
constexpr uint64_t kGridMembers[64] = {
    0x92050aa5082357a7, 0x0422001022892317, 0x09000aa4112249a3, 0x228005104a052208,
    0x0100020904128801, 0x084000a208450014, 0x0200040002000a40, 0x0000110008450015,
    0x040250005205ab17, 0x410005020902114b, 0x040120090411a401, 0x0104000211820992,
    0x000011440a001428, 0x0000020005020902, 0x0000005000910000, 0x010400022002050a,
    0x2980052a058a55ab, 0x0000020412248905, 0x12008802810a0092, 0x004001040a140225,
    0x2400000224090082, 0x0100080180040210, 0x0002200000020085, 0x0000010801400220,
    0x020802942a04aa04, 0x44010001000a102a, 0x0000010014010401, 0x0800208a018a1102,
    0x0011040002044208, 0x0800401004200502, 0x0000000200004000, 0x000000002005000a,
    0x0100010204910411, 0x0000220821040a84, 0x010480010802210a, 0x0000000022050a10,
    0x0200000180100005, 0x00040000000200a0, 0x0001000010000800, 0x0000020801002100,
    0x1040049100041104, 0x040000000402042a, 0x0000080041080201, 0x0820021000800184,
    0x0000004004010012, 0x00000a0000400400, 0x0000000400000000, 0x0000000000040014,
    0x000100000a002a00, 0x0010000000810001, 0x0104200410000400, 0x0000000100021001,
    0x0004000800200000, 0x0001000010000009, 0x0000000100000020, 0x0000000000000a00,
    0x0004100140050091, 0x0000002800100204, 0x0000020001024112, 0x0000080024000004,
    0x0000010000010822, 0x0000000400040000, 0x0000000002000004, 0x0000000000000001,
};

// The 512 points, each as its four magnitudes.
constexpr auto kGrid = [] {
  std::array<std::array<uint8_t, 4>, 512> g{};
  int i = 0;
  for (int n = 0; n < 4096; ++n)
    if (kGridMembers[n / 64] >> (n % 64) & 1)
      g[static_cast<size_t>(i++)] = {static_cast<uint8_t>(2 * (n % 8) + 1), static_cast<uint8_t>(2 * (n / 8 % 8) + 1),
                                     static_cast<uint8_t>(2 * (n / 64 % 8) + 1), static_cast<uint8_t>(2 * (n / 512) + 1)};
  return g;
}();

}  // namespace

constexpr std::array<uint32_t, 512> kIq3sGrid = [] {
  std::array<uint32_t, 512> words{};
  for (size_t i = 0; i < words.size(); ++i)
    for (size_t j = 0; j < 4; ++j) words[i] |= static_cast<uint32_t>(kGrid[i][j]) << (8 * j);
  return words;
}();

namespace {

// Sub-block s (32 elements) reads scales[s / 2] (low nibble for even s),
// qh[s], qs[8s..8s + 7] and signs[4s..4s + 3]: its element 4q + j (q < 8)
// has magnitude kGrid[qs[8s + q] | (bit q of qh[s]) << 8][j], and element
// e the sign bit e % 8 of signs[4s + e / 8].
int scale_factor(const BlockIQ3_S& b, int s) { return 1 + 2 * (s % 2 ? b.scales[s / 2] >> 4 : b.scales[s / 2] & 0xF); }

const std::array<uint8_t, 4>& grid_point(const BlockIQ3_S& b, int s, int q) {
  return kGrid[static_cast<size_t>(b.qs[8 * s + q] | ((b.qh[s] >> q) & 1) << 8)];
}

bool negative(const BlockIQ3_S& b, int s, int e) { return (b.signs[4 * s + e / 8] >> (e % 8)) & 1; }

}  // namespace

// All in integers per super-block: |isum| <= 8 * 31 * 32 * 15 * 127 < 2^24,
// so float(isum) is exact; then d_x * d * isum, blocks summed in order.
float mix_scalar::vec_dot_iq3_s_q8_K(int64_t k, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockIQ3_S*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sum = 0.f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int isum = 0;
    for (int s = 0; s < 8; ++s) {
      int part = 0;
      for (int q = 0; q < 8; ++q) {
        const std::array<uint8_t, 4>& g = grid_point(w[b], s, q);
        for (int j = 0; j < 4; ++j) {
          const int e = 4 * q + j, v = g[static_cast<size_t>(j)] * x[b].qs[32 * s + e];
          part += negative(w[b], s, e) ? -v : v;
        }
      }
      isum += scale_factor(w[b], s) * part;
    }
    sum += x[b].d * f16_to_f32(w[b].d) * static_cast<float>(isum);
  }
  return sum;
}

void dequantize_row_iq3_s(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockIQ3_S*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const BlockIQ3_S& blk = x[b];
    const float d = f16_to_f32(blk.d);
    for (int s = 0; s < 8; ++s) {
      const float db = d * static_cast<float>(scale_factor(blk, s));
      for (int q = 0; q < 8; ++q) {
        const std::array<uint8_t, 4>& g = grid_point(blk, s, q);
        for (int j = 0; j < 4; ++j)
          *y++ = db * static_cast<float>(g[static_cast<size_t>(j)]) * (negative(blk, s, 4 * q + j) ? -1.f : 1.f);
      }
    }
  }
}

}  // namespace duet
