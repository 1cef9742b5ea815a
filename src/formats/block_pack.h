// Filling GGUF's 32-element blocks (core/quant_blocks.h) from values a
// checkpoint already holds in another layout. formats may not use the
// kernels' row quantizers (the layer table), and most of what it packs
// needs no quantizing at all: 4-bit codes and their f16 scales go into
// Q4_0/Q4_1 bit for bit. Only Q8_0 rounds, by the rule the kernels use.
#pragma once

#include <cstdint>

#include "core/quant_blocks.h"

namespace duet {

// q: 32 codes 0..15 in element order; d, m: f16 bits.
BlockQ4_0 pack_q4_0(const uint8_t* q, uint16_t d);
BlockQ4_1 pack_q4_1(const uint8_t* q, uint16_t d, uint16_t m);

// 32 floats: d = amax / 127 (stored as f16), q = round(x / d) half away from zero.
BlockQ8_0 quantize_q8_0(const float* x);

}  // namespace duet
