// The AVX-512 build of the float weight types' kernels (float_kernels_simd.h).

#include "kernels/avx512_quiet.h"

#include "kernels/float_kernels_simd.h"

namespace duet {

// 4 rows x 4 tokens: 16 accumulators + 4 activation vectors + 1 weight vector
// fit the 32 zmm registers, and 8 loads feed 16 FMAs, so the FMA units, not
// the load ports, set the pace. Up to 8 tokens, one row at a time keeps the
// weights one linear stream, which reads faster than 4 interleaved rows.
constexpr FloatTypeKernels kFloatAvx512 =
    float_simd::float_types<vec::Vec512, float_simd::Tiles<4, 4, 8, float_simd::Prefetch::kAhead>>();

}  // namespace duet
