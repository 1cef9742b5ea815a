#include "kernels/probes_simd.h"

namespace duet {

constexpr ProbeKernels kProbesAvx2 = probes_simd::kernels<vec::Vec256>();

}  // namespace duet
