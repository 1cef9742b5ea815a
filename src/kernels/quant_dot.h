// The dot products and activation quantizers behind quant_kernels.h's
// QuantTypeKernels, one namespace per CPU level. Weight rows first, activation rows second; k is a
// multiple of the block size. Activation quants must lie in [-127, 127] (the
// quantizers never write -128), which the SIMD sign tricks rely on.
#pragma once

#include <cstddef>
#include <cstdint>

namespace duet {

#define DUET_QUANT_DOT_DECLS                                              \
  float vec_dot_q8_0_q8_0(int64_t k, const void* w, const void* x);     \
  float vec_dot_q4_0_q8_0(int64_t k, const void* w, const void* x);     \
  float vec_dot_q4_1_q8_1(int64_t k, const void* w, const void* x);     \
  float vec_dot_q4_K_q8_K(int64_t k, const void* w, const void* x);     \
  float vec_dot_q5_K_q8_K(int64_t k, const void* w, const void* x);     \
  float vec_dot_q6_K_q8_K(int64_t k, const void* w, const void* x);

namespace quant_scalar { DUET_QUANT_DOT_DECLS }
namespace quant_avx2 {
DUET_QUANT_DOT_DECLS
void quantize_row_q8_0(const float* x, void* y, int64_t k);
void quantize_row_q8_1(const float* x, void* y, int64_t k);
void quantize_row_q8_K(const float* x, void* y, int64_t k);
}  // namespace quant_avx2
namespace quant_avx512 {
DUET_QUANT_DOT_DECLS
// The blocked dot products of quant_gemm_avx512.cc (a DotBlockFn each).
void dot_block_q8_0(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
                    int64_t n_tok, float* y, int64_t y_stride);
void dot_block_q4_0(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
                    int64_t n_tok, float* y, int64_t y_stride);
}  // namespace quant_avx512

#undef DUET_QUANT_DOT_DECLS

}  // namespace duet
