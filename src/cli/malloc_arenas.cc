#include "cli/malloc_arenas.h"

#include <malloc.h>

namespace duet::cli {

void limit_malloc_arenas() { mallopt(M_ARENA_MAX, 1); }

void map_large_allocations() { mallopt(M_MMAP_THRESHOLD, 256 << 10); }

}  // namespace duet::cli
