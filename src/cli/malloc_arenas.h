// The server's allocator settings: glibc's malloc arenas limited to one, and
// large blocks always mapped on their own.
#pragma once

namespace duet::cli {

// glibc gives threads their own malloc arenas (up to 8 per core), and each
// arena keeps what its threads freed. `duet serve` runs a pool of HTTP
// workers that take requests in turn: they spread their churn over every
// arena, and the resident memory crept up through a whole 10-minute soak
// (+13 % after warm-up) with no more memory in use (heaptrack: nothing
// leaked, a steady peak). With one arena what any worker frees is reused by
// all: +8 %, flat after about 7 minutes, the rest being glibc's per-thread
// caches filling (docs/serving.md, "Soak"). The workers mostly wait on the
// engine, so they hardly contend for the one arena. Call before starting
// any thread.
void limit_malloc_arenas();

// glibc serves a block of 128 KiB or more by its own mapping, returned to
// the system when freed, but raises that threshold to the largest such
// block freed so far (up to 32 MiB). One 6 MB /tokenize response freed was
// enough for every later one to come from the heap and stay resident after
// its request: 48 clients at once left 556 MB behind. Fixed at 256 KiB,
// request bodies, prompts and responses of that size always go back.
void map_large_allocations();

}  // namespace duet::cli
