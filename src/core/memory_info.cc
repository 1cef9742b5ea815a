#include "core/memory_info.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace duet {
namespace {

constexpr uint64_t kUnknown = UINT64_MAX;

// The first number in a file ("max" and unreadable files: unknown).
uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  return in >> v ? v : kUnknown;
}

uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return kUnknown;
}

// The memory cgroup this process is in (v1 "memory" line, or v2 "0::").
std::string cgroup_path(bool* v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line, unified;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "memory") return *v2 = false, path;
    if (controllers.empty()) unified = path;
  }
  *v2 = true;
  return unified;
}

// A key's value in a cgroup's memory.stat.
uint64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// Limit less the working set (usage without the inactive page cache, which
// the kernel reclaims first) of the cgroup; the mounted view may be the
// cgroup itself, as in a container, or the whole hierarchy.
uint64_t cgroup_headroom() {
  bool v2 = false;
  const std::string path = cgroup_path(&v2);
  const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
  const char* limit_file = v2 ? "/memory.max" : "/memory.limit_in_bytes";
  const char* usage_file = v2 ? "/memory.current" : "/memory.usage_in_bytes";
  for (const std::string& dir : {root + path, root}) {
    const uint64_t limit = read_number(dir + limit_file), usage = read_number(dir + usage_file);
    if (limit == kUnknown || usage == kUnknown) continue;
    if (limit >= (uint64_t{1} << 60)) return kUnknown;  // "no limit"
    const uint64_t inactive = stat_value(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    const uint64_t working = usage > inactive ? usage - inactive : 0;
    return limit > working ? limit - working : 0;
  }
  return kUnknown;
}

}  // namespace

uint64_t available_memory_bytes() { return std::min(mem_available(), cgroup_headroom()); }

ResidentMemory parse_resident_memory(std::istream& status) {
  ResidentMemory r;
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:") r.total = kib * 1024;
    else if (key == "RssAnon:") r.anon = kib * 1024;
    else if (key == "RssFile:") r.file = kib * 1024;
    else if (key == "RssShmem:") r.shmem = kib * 1024;
  }
  return r;
}

ResidentMemory resident_memory() {
  std::ifstream in("/proc/self/status");
  return parse_resident_memory(in);
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace duet
