// GCC 12's AVX-512 headers build "undefined" vectors by self-assignment,
// which -Wall reports at every inlined use; nothing here reads such a value.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/probes_simd.h"

namespace duet {

constexpr ProbeKernels kProbesAvx512 = probes_simd::kernels<vec::Vec512>();

}  // namespace duet
