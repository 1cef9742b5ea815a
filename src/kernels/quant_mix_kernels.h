// Kernels of the block types llama-quantize's mixes fall back to or are
// built from (Q5_0, Q5_1, IQ4_NL against Q8_0/Q8_1 activations; Q2_K, Q3_K,
// IQ4_XS, TQ1_0, TQ2_0 against Q8_K), beside quant_kernels.h's older ones.
// The scalar dots are in quant_mix_kernels.cc; the AVX2 and AVX-512 ones are
// one source (quant_mix_simd.h) compiled at both levels.
#pragma once

#include <cstdint>

#include "kernels/type_kernels.h"

namespace duet {

struct MixTypeKernels {
  TypeKernels q5_0, q5_1, iq4_nl, q2_K, q3_K, iq4_xs, tq1_0, tq2_0;
};
extern const MixTypeKernels kMixScalar, kMixAvx2, kMixAvx512;

// The dot products, weight row first; one namespace per level.
#define DUET_MIX_DOT_DECLS                                           \
  float vec_dot_q5_0_q8_0(int64_t k, const void* w, const void* x);   \
  float vec_dot_q5_1_q8_1(int64_t k, const void* w, const void* x);   \
  float vec_dot_iq4_nl_q8_0(int64_t k, const void* w, const void* x); \
  float vec_dot_q2_K_q8_K(int64_t k, const void* w, const void* x);   \
  float vec_dot_q3_K_q8_K(int64_t k, const void* w, const void* x);   \
  float vec_dot_iq4_xs_q8_K(int64_t k, const void* w, const void* x); \
  float vec_dot_tq1_0_q8_K(int64_t k, const void* w, const void* x);  \
  float vec_dot_tq2_0_q8_K(int64_t k, const void* w, const void* x);

namespace mix_scalar { DUET_MIX_DOT_DECLS }
namespace mix_avx2 { DUET_MIX_DOT_DECLS }
namespace mix_avx512 { DUET_MIX_DOT_DECLS }

#undef DUET_MIX_DOT_DECLS

}  // namespace duet
