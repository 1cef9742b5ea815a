// AVX2 dot products of the mix types: byte dots as maddubs (pairs into
// int16) widened by madd.
#include "kernels/quant_mix_kernels.h"
#include "kernels/quant_mix_simd.h"

namespace duet::mix_avx2 {
namespace {

struct Ops {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i madd(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
};

}  // namespace

DUET_MIX_DEFINE_DOTS

}  // namespace duet::mix_avx2
