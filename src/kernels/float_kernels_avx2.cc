// The AVX2 build of the float weight types' kernels (float_kernels_simd.h).
#include "kernels/float_kernels_simd.h"

namespace duet {

// 4 rows x 2 tokens: 8 accumulators + 2 activation vectors + 1 weight vector
// stay within the 16 ymm registers.
constexpr FloatTypeKernels kFloatAvx2 =
    float_simd::float_types<vec::Vec256, float_simd::Tiles<4, 2, 0, float_simd::Prefetch::kNextRows>>();

}  // namespace duet
