// A whole file in read-only memory. Weights are used in place from it.
// LoadMode::kMap (the default) maps the file: no copy, pages shared with the
// page cache and with other processes, but 4 KiB pages, so a decode step that
// streams gigabytes of weights takes a TLB miss every 4 KiB.
// LoadMode::kRead (--no-mmap) reads the file into anonymous memory advised
// as transparent huge pages (2 MiB): a copy and a slower start, but fewer TLB
// misses while streaming (docs/performance.md, "Decode kernels").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace duet {

enum class LoadMode { kMap, kRead };

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path, LoadMode mode = LoadMode::kMap);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Hands the whole pages inside [p, p + n) back to the kernel when they are
  // mapped from the file: a later read faults them in again from it. A
  // copy in memory (kRead), or a range not in this file, is left alone.
  void drop_pages(const void* p, size_t n) const;

 private:
  void release();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes to munmap (size_ rounded up for kRead)
  bool from_file_ = false;  // pages mapped from the file (kMap), not a copy
  std::string path_;
};

}  // namespace duet
