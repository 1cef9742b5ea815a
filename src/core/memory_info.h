// How much memory this process may still fill: the kernel's MemAvailable,
// capped by the memory cgroup's limit less its usage (containers and
// `systemd-run -p MemoryMax=` set one). Loading decides from it what to copy
// into anonymous memory and what to leave in the file's page cache. And how
// much this process holds resident, by kind, for `duet bench` to set beside
// what the model and its KV cache should take.
#pragma once

#include <cstdint>
#include <istream>

namespace duet {

// Bytes; UINT64_MAX when nothing can be read (then nothing is capped).
uint64_t available_memory_bytes();

// Resident bytes of this process (VmRSS), split as the kernel counts them:
// anonymous pages (owned copies, the KV cache, scratch), pages of mapped
// files (the model's weights read in place) and shared memory.
struct ResidentMemory {
  uint64_t total = 0, anon = 0, file = 0, shmem = 0;
};

// All zero when /proc/self/status cannot be read.
ResidentMemory resident_memory();
// The same from the text of a /proc/PID/status file.
ResidentMemory parse_resident_memory(std::istream& status);

// Gives the free pages inside the heap back to the system. glibc returns
// only the heap's top on free(); a request that built many small objects
// leaves its pages resident, scattered among live ones, until this is
// called (malloc_trim). A no-op elsewhere.
void release_free_memory();

}  // namespace duet
