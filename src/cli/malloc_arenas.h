// The server's allocator setting: glibc's malloc arenas limited to one.
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

}  // namespace duet::cli
