// Kernels of the float weight types (F32, F16, BF16). Their activations stay
// F32 for every type: the weight row is what decode reads from memory, and
// widening F16/BF16 to F32 in registers is exact and costs no bandwidth, so
// narrowing the activations would lose precision for no speed.
//
// Beyond the TypeKernels traits, each level has a blocked dot kernel that
// computes several weight rows against several tokens at once (prefill's
// register blocking). Every (row, token) dot is summed in the same order
// whatever the blocking and equals that level's vec_dot bit for bit, so one
// token's result does not depend on what else is in the batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/type_kernels.h"

namespace duet {

// y[t * y_stride + r] = dot(weight row r, x row t) for r < n_rows, t < n_tok.
// Weight rows are k elements, w_stride bytes apart; x rows are k floats,
// x_stride floats apart.
using DotBlockFn = void (*)(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows,
                            const float* x, int64_t x_stride, int64_t n_tok, float* y,
                            int64_t y_stride);

struct FloatKernels {
  TypeKernels traits;
  DotBlockFn dot_block = nullptr;
  // dot_block walks k in chunks of this many elements (0: whole rows), so a
  // cache tile needs only a chunk of each weight row at a time.
  int64_t k_chunk = 0;
};

// The kernels of t at one level; nullptr if t is not F32, F16 or BF16.
const FloatKernels* float_kernels_scalar(DType t);
const FloatKernels* float_kernels_avx2(DType t);
const FloatKernels* float_kernels_avx512(DType t);

// Dispatches on level (defined in type_kernels.cc).
const FloatKernels* float_kernels_at(DType t, CpuLevel level);
// For the active CPU level, chosen once.
const FloatKernels* float_kernels(DType t);

}  // namespace duet
