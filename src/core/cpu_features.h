// What this CPU can run, read once from CPUID; kernels/registry.h chooses the
// kernels from it. DUET_CPU=scalar|avx2|avx512 caps the level (for tests).
#pragma once

#include <string_view>

namespace duet {

enum class CpuLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avxvnni = false;

  // The best level whose whole instruction set is present.
  CpuLevel best_level() const;
};

const CpuFeatures& cpu_features();

// best_level(), capped by DUET_CPU if that is set.
CpuLevel active_cpu_level();
std::string_view cpu_level_name(CpuLevel level);

}  // namespace duet
