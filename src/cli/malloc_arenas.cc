#include "cli/malloc_arenas.h"

#include <malloc.h>

namespace duet::cli {

void limit_malloc_arenas() { mallopt(M_ARENA_MAX, 1); }

}  // namespace duet::cli
