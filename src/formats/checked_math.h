// Overflow-checked size arithmetic for parsers of untrusted files: a lying
// count or shape must become an error, never a wrapped-around small number.
#pragma once

#include <cstdint>

namespace duet {

inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// Rounds x up to a multiple of `align` (a power of two).
inline bool align_up(uint64_t x, uint64_t align, uint64_t* out) {
  if (!checked_add(x, align - 1, out)) return false;
  *out &= ~(align - 1);
  return true;
}

}  // namespace duet
