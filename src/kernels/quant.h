// Scalar reference quantizers and dequantizers of the GGUF block types
// (layouts in core/quant_blocks.h). These define the results every SIMD
// kernel must reproduce, and they write the bytes `duet quantize` stores.
//
// Methods (all follow ggml's reference rules, so files interchange):
//  - Q8_0, Q8_1: d = amax/127, q = round-half-away(x/d).
//  - Q4_0: d = m/-8 where m is the element of largest magnitude, q =
//    min(15, trunc(x/d + 8.5)); Q4_1: d = (max-min)/15, m = min.
//  - Q8_K: d = max/-127 (max as for Q4_0), q = round-half-even(x/d).
//  - Q4_K, Q5_K: per 32-element sub-block, a weighted least-squares fit of
//    x ~ scale*q - min (min >= 0) over a grid of 21 candidate step sizes
//    around (max-min)/nmax; each candidate's levels are rounded, then scale
//    and min are solved in closed form (2x2 normal equations) and the fit
//    with the lowest weighted squared error wins. Weights are |x| + rms(x)
//    by default. Scales and mins are then quantized to 6 bits against the
//    block's largest of each, and the levels re-rounded with the stored ones.
//  - Q6_K: per 16-element sub-block a symmetric fit x ~ scale*(q-32),
//    trying 19 step sizes around max/32 and keeping the one maximizing
//    (sum w*x*q)^2 / sum w*q^2 (the least-squares error reduction); weights
//    x^2 by default; scales quantized to int8 against the largest.
//  - Q5_0, Q5_1: as Q4_0 and Q4_1 with 31 levels: d = m/-16, q = min(31,
//    trunc(x/d + 16.5)); d = (max-min)/31 (quant_q5.cc).
//  - Q2_K: Q4_K's affine fit per 16-element sub-block with levels 0-3, 4-bit
//    scales and mins; Q3_K: Q6_K's symmetric fit with levels -4..3 and
//    signed 6-bit scales (quant_k_low.cc).
//  - IQ4_NL, IQ4_XS: per 32 elements, the grid scale of 15 candidates with
//    the largest weighted least-squares gain; IQ4_XS then codes them in 6
//    bits against the largest (quant_iq4.cc).
//  - TQ1_0, TQ2_0: d = max|x|, trits round(x/d) (quant_ternary.cc).
//  - importance (optional, k values >= 0, e.g. mean squared activations per
//    input column): the K-quants then weight element i by
//    importance[i] * sqrt(sigma2 + x[i]^2), sigma2 = 2 * mean(x^2) of the
//    super-block, so the error lands where activations are small.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace duet {

// k must be a multiple of the type's block size; y holds k/block blocks.
void quantize_row_q8_0(const float* x, void* y, int64_t k);
void quantize_row_q8_1(const float* x, void* y, int64_t k);
void quantize_row_q4_0(const float* x, void* y, int64_t k);
void quantize_row_q4_1(const float* x, void* y, int64_t k);
void quantize_row_q8_K(const float* x, void* y, int64_t k);
void quantize_row_q4_K(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_q5_K(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_q6_K(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_q5_0(const float* x, void* y, int64_t k);
void quantize_row_q5_1(const float* x, void* y, int64_t k);
void quantize_row_q2_K(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_q3_K(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_iq4_nl(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_iq4_xs(const float* x, void* y, int64_t k, const float* importance = nullptr);
void quantize_row_tq1_0(const float* x, void* y, int64_t k);
void quantize_row_tq2_0(const float* x, void* y, int64_t k);

void dequantize_row_q8_0(const void* x, float* y, int64_t k);
void dequantize_row_q8_1(const void* x, float* y, int64_t k);
void dequantize_row_q4_0(const void* x, float* y, int64_t k);
void dequantize_row_q4_1(const void* x, float* y, int64_t k);
void dequantize_row_q8_K(const void* x, float* y, int64_t k);
void dequantize_row_q4_K(const void* x, float* y, int64_t k);
void dequantize_row_q5_K(const void* x, float* y, int64_t k);
void dequantize_row_q6_K(const void* x, float* y, int64_t k);
void dequantize_row_q5_0(const void* x, float* y, int64_t k);
void dequantize_row_q5_1(const void* x, float* y, int64_t k);
void dequantize_row_q2_K(const void* x, float* y, int64_t k);
void dequantize_row_q3_K(const void* x, float* y, int64_t k);
void dequantize_row_iq4_nl(const void* x, float* y, int64_t k);
void dequantize_row_iq4_xs(const void* x, float* y, int64_t k);
void dequantize_row_iq3_s(const void* x, float* y, int64_t k);  // no quantizer: duet runs IQ3_S, never writes it
void dequantize_row_tq1_0(const void* x, float* y, int64_t k);
void dequantize_row_tq2_0(const void* x, float* y, int64_t k);

// Quantizes a row of k finite floats to `t` (one of the types above); an
// error for other types, a k that does not fill whole blocks, or an infinity
// or NaN in x. importance is used by the K-quants and IQ4 types and ignored
// by the others, whose rule is fixed.
Status quantize_row(DType t, const float* x, void* y, int64_t k,
                    const float* importance = nullptr);
// Dequantizes a row of k elements of `t` (one of the types above).
Status dequantize_row(DType t, const void* x, float* y, int64_t k);
// Whether dequantize_row reads t (so `duet quantize` can convert from it).
bool dequantizable(DType t);

}  // namespace duet
