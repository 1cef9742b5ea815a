// Included first by each *_avx512.cc: GCC 12's AVX-512 headers build
// "undefined" vectors by self-assignment, which -Wall reports at every
// inlined use; nothing in duet reads such a value. Clang neither warns
// there nor knows -Wmaybe-uninitialized.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
