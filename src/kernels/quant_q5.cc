// Q5_0 and Q5_1: Q4_0 and Q4_1 with a fifth bit per element. The quantizers
// follow ggml's fixed rules (d = m/-16 with m the element of largest
// magnitude; d = (max-min)/31 and the min as offset), so the same floats
// give the same bytes as llama-quantize writes.
#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"
#include "kernels/quant_fit.h"

namespace duet {
namespace {

// The fifth bits of a block as one little-endian word: bit i for element i.
uint32_t high_bits(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

void put_high_bits(uint32_t bits, uint8_t* qh) {
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(bits >> (8 * i));
}

// Packs 32 levels in [0, 31]: low nibbles as Q4_0, fifth bits in qh.
template <class Block>
void pack5(const int* L, Block& y) {
  uint32_t bits = 0;
  for (int i = 0; i < kQK32 / 2; ++i) {
    y.qs[i] = static_cast<uint8_t>((L[i] & 0xF) | ((L[i + 16] & 0xF) << 4));
    bits |= static_cast<uint32_t>(L[i] >> 4) << i;
    bits |= static_cast<uint32_t>(L[i + 16] >> 4) << (i + 16);
  }
  put_high_bits(bits, y.qh);
}

// Level of element i of a 5-bit block, in [0, 31].
template <class Block>
int level5(const Block& b, uint32_t bits, int i) {
  const int low = i < 16 ? b.qs[i] & 0xF : b.qs[i - 16] >> 4;
  return low | static_cast<int>(((bits >> i) & 1) << 4);
}

}  // namespace

void quantize_row_q5_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ5_0*>(vy);
  for (int64_t b = 0; b < k / kQK32; ++b, x += kQK32) {
    float amax;
    const float max = quant_fit::signed_absmax(x, kQK32, &amax);
    const float d = max / -16.f;  // the extreme element maps to level 0
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = f32_to_f16(d);
    int L[kQK32];
    // Truncation of x/d + 16.5 is rounding half up of x/d + 16.
    for (int i = 0; i < kQK32; ++i) L[i] = std::min(31, static_cast<int>(static_cast<int8_t>(x[i] * id + 16.5f)));
    pack5(L, y[b]);
  }
}

void quantize_row_q5_1(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockQ5_1*>(vy);
  for (int64_t b = 0; b < k / kQK32; ++b, x += kQK32) {
    const auto [lo, hi] = std::minmax_element(x, x + kQK32);
    const float d = (*hi - *lo) / 31.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(*lo);
    int L[kQK32];
    for (int i = 0; i < kQK32; ++i)
      L[i] = std::min(31, static_cast<int>(static_cast<int8_t>((x[i] - *lo) * id + 0.5f)));
    pack5(L, y[b]);
  }
}

void dequantize_row_q5_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ5_0*>(vx);
  for (int64_t b = 0; b < k / kQK32; ++b, y += kQK32) {
    const float d = f16_to_f32(x[b].d);
    const uint32_t bits = high_bits(x[b].qh);
    for (int i = 0; i < kQK32; ++i) y[i] = static_cast<float>(level5(x[b], bits, i) - 16) * d;
  }
}

void dequantize_row_q5_1(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockQ5_1*>(vx);
  for (int64_t b = 0; b < k / kQK32; ++b, y += kQK32) {
    const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
    const uint32_t bits = high_bits(x[b].qh);
    // Multiply, then add, each rounded (no fused multiply-add), as ggml does.
    for (int i = 0; i < kQK32; ++i) y[i] = static_cast<float>(level5(x[b], bits, i)) * d + m;
  }
}

}  // namespace duet
