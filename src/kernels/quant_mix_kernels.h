// Kernels of the block types llama-quantize's mixes fall back to or are
// built from (Q5_0, Q5_1, IQ4_NL against Q8_0/Q8_1 activations; Q2_K, Q3_K,
// IQ4_XS, TQ1_0, TQ2_0, IQ3_S against Q8_K), beside quant_kernels.h's older
// ones.
// The scalar dots are in quant_mix_kernels.cc; the AVX2 and AVX-512 ones,
// and their blocked forms for prefill, are one source (quant_mix_simd.h)
// compiled at both levels.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/type_kernels.h"

namespace duet {

struct MixTypeKernels {
  TypeKernels q5_0, q5_1, iq4_nl, q2_K, q3_K, iq4_xs, tq1_0, tq2_0, iq3_s;
};
extern const MixTypeKernels kMixScalar, kMixAvx2, kMixAvx512;
// IQ3_S's 512 grid points (quant_iq3.cc), each its four magnitudes as the
// bytes of a little-endian word, element 0 lowest.
extern const std::array<uint32_t, 512> kIq3sGrid;

// The dot products, weight row first; one namespace per level.
#define DUET_MIX_DOT_DECLS                                           \
  float vec_dot_q5_0_q8_0(int64_t k, const void* w, const void* x);   \
  float vec_dot_q5_1_q8_1(int64_t k, const void* w, const void* x);   \
  float vec_dot_iq4_nl_q8_0(int64_t k, const void* w, const void* x); \
  float vec_dot_q2_K_q8_K(int64_t k, const void* w, const void* x);   \
  float vec_dot_q3_K_q8_K(int64_t k, const void* w, const void* x);   \
  float vec_dot_iq4_xs_q8_K(int64_t k, const void* w, const void* x); \
  float vec_dot_tq1_0_q8_K(int64_t k, const void* w, const void* x);  \
  float vec_dot_tq2_0_q8_K(int64_t k, const void* w, const void* x);  \
  float vec_dot_iq3_s_q8_K(int64_t k, const void* w, const void* x);

// The SIMD levels' blocked dots (TypeKernels::dot_block): a row at a time,
// each decoded weight block meeting up to 4 tokens; per (row, token) the same
// bits as vec_dot.
#define DUET_MIX_BLOCK_DECL(name)                                                                              \
  void dot_block_##name(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, \
                        size_t x_stride, int64_t n_tok, float* y, int64_t y_stride);
#define DUET_MIX_BLOCK_DECLS                                                                                    \
  DUET_MIX_BLOCK_DECL(q5_0_q8_0)                                                                              \
  DUET_MIX_BLOCK_DECL(q5_1_q8_1)                                                                              \
  DUET_MIX_BLOCK_DECL(iq4_nl_q8_0)                                                                            \
  DUET_MIX_BLOCK_DECL(q2_K_q8_K)                                                                              \
  DUET_MIX_BLOCK_DECL(q3_K_q8_K)                                                                              \
  DUET_MIX_BLOCK_DECL(iq4_xs_q8_K)                                                                            \
  DUET_MIX_BLOCK_DECL(tq1_0_q8_K)                                                                             \
  DUET_MIX_BLOCK_DECL(tq2_0_q8_K)                                                                             \
  DUET_MIX_BLOCK_DECL(iq3_s_q8_K)

namespace mix_scalar { DUET_MIX_DOT_DECLS }
namespace mix_avx2 { DUET_MIX_DOT_DECLS DUET_MIX_BLOCK_DECLS }
namespace mix_avx512 { DUET_MIX_DOT_DECLS DUET_MIX_BLOCK_DECLS }

#undef DUET_MIX_DOT_DECLS
#undef DUET_MIX_BLOCK_DECL
#undef DUET_MIX_BLOCK_DECLS

}  // namespace duet
