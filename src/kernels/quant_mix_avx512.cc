// AVX-512 VNNI dot products of the mix types: the same code as AVX2's
// (quant_mix_simd.h) with the byte and word dots fused into one
// accumulating instruction each (vpdpbusd, vpdpwssd on 256-bit registers,
// AVX-512VL), which halves the integer work of the inner loops; IQ3_S's
// batch dot runs in 512-bit registers there.
#include "kernels/avx512_quiet.h"

#include "kernels/quant_mix_kernels.h"
#include "kernels/quant_mix_simd.h"

namespace duet::mix_avx512 {
namespace {

struct Ops {
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i madd(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
};

}  // namespace

DUET_MIX_DEFINE_DOTS

}  // namespace duet::mix_avx512
