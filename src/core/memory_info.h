// How much memory this process may still fill: the kernel's MemAvailable,
// capped by the memory cgroup's limit less its usage (containers and
// `systemd-run -p MemoryMax=` set one). Loading decides from it what to copy
// into anonymous memory and what to leave in the file's page cache.
#pragma once

#include <cstdint>

namespace duet {

// Bytes; UINT64_MAX when nothing can be read (then nothing is capped).
uint64_t available_memory_bytes();

}  // namespace duet
