// TQ1_0 and TQ2_0, the ternary types of BitNet-style models: every element
// is -d, 0 or +d with one f16 d per 256. TQ2_0 stores each trit in 2 bits;
// TQ1_0 packs 5 trits per byte (3^5 = 243 <= 256) in a form whose n-th trit
// comes out of a multiply and a shift (quant_blocks.h), no division.
#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/quant.h"

namespace duet {
namespace {

constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

// Trits t in {0, 1, 2} (x = d * (t - 1)) of a block, and d = max |x|.
float to_trits(const float* x, uint8_t* t) {
  float amax = 0.f;
  for (int i = 0; i < kQKK; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float id = amax != 0.f ? 1.f / amax : 0.f;
  for (int i = 0; i < kQKK; ++i) t[i] = static_cast<uint8_t>(std::lround(x[i] * id) + 1);
  return amax;
}

// n trits, first most significant, to a byte decodable by trit().
uint8_t pack_trits(const uint8_t* t, int n, int stride) {
  int v = 0;
  for (int i = 0; i < 5; ++i) v = v * 3 + (i < n ? t[i * stride] : 0);
  return static_cast<uint8_t>((v * 256 + 242) / 243);  // ceil(v * 256 / 243)
}

int trit(uint8_t byte, int n) {
  const auto q = static_cast<uint8_t>(byte * kPow3[n]);
  return (q * 3) >> 8;
}

}  // namespace

void quantize_row_tq1_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockTQ1_0*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b, x += kQKK) {
    uint8_t t[kQKK];
    y[b].d = f32_to_f16(to_trits(x, t));
    for (int m = 0; m < 32; ++m) y[b].qs[m] = pack_trits(t + m, 5, 32);
    for (int m = 0; m < 16; ++m) y[b].qs[32 + m] = pack_trits(t + 160 + m, 5, 16);
    for (int j = 0; j < 4; ++j) y[b].qh[j] = pack_trits(t + 240 + j, 4, 4);
  }
}

void quantize_row_tq2_0(const float* x, void* vy, int64_t k) {
  auto* y = static_cast<BlockTQ2_0*>(vy);
  for (int64_t b = 0; b < k / kQKK; ++b, x += kQKK) {
    uint8_t t[kQKK];
    y[b].d = f32_to_f16(to_trits(x, t));
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const uint8_t* th = t + 128 * h + l;
        y[b].qs[32 * h + l] = static_cast<uint8_t>(th[0] | th[32] << 2 | th[64] << 4 | th[96] << 6);
      }
  }
}

void dequantize_row_tq1_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockTQ1_0*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b, y += kQKK) {
    const float d = f16_to_f32(x[b].d);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) y[32 * n + m] = static_cast<float>(trit(x[b].qs[m], n) - 1) * d;
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) y[160 + 16 * n + m] = static_cast<float>(trit(x[b].qs[32 + m], n) - 1) * d;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) y[240 + 4 * n + j] = static_cast<float>(trit(x[b].qh[j], n) - 1) * d;
  }
}

void dequantize_row_tq2_0(const void* vx, float* y, int64_t k) {
  const auto* x = static_cast<const BlockTQ2_0*>(vx);
  for (int64_t b = 0; b < k / kQKK; ++b, y += kQKK) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQKK; ++i) {
      const int t = (x[b].qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
      y[i] = static_cast<float>(t - 1) * d;
    }
  }
}

}  // namespace duet
