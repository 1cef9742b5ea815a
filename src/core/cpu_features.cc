#include "core/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace duet {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  if (!osxsave) return f;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_os = (xlo & 0x6) == 0x6;
  const bool zmm_os = (xlo & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = ymm_os && (b & (1u << 5));
  f.avx512f = zmm_os && (b & (1u << 16));
  f.avx512dq = zmm_os && (b & (1u << 17));
  f.avx512bw = zmm_os && (b & (1u << 30));
  f.avx512vl = zmm_os && (b & (1u << 31));
  f.avx512vnni = zmm_os && (c & (1u << 11));
  unsigned a1, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
    f.avxvnni = ymm_os && (a1 & (1u << 4));
    f.avx512bf16 = zmm_os && (a1 & (1u << 5));
  }
#endif
  return f;
}

}  // namespace

CpuLevel CpuFeatures::best_level() const {
  // The AVX-512 level is compiled with F, BW, VL, DQ and VNNI; require them all.
  if (avx2 && fma && f16c && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni)
    return CpuLevel::kAvx512;
  if (avx2 && fma && f16c) return CpuLevel::kAvx2;
  return CpuLevel::kScalar;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

CpuLevel active_cpu_level() {
  CpuLevel level = cpu_features().best_level();
  if (const char* env = std::getenv("DUET_CPU")) {
    CpuLevel cap = level;
    if (std::strcmp(env, "scalar") == 0) cap = CpuLevel::kScalar;
    else if (std::strcmp(env, "avx2") == 0) cap = CpuLevel::kAvx2;
    else if (std::strcmp(env, "avx512") == 0) cap = CpuLevel::kAvx512;
    if (cap < level) level = cap;
  }
  return level;
}

std::string_view cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::kAvx512: return "avx512";
    case CpuLevel::kAvx2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace duet
