#include "core/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace duet {

Result<HugeBuffer> HugeBuffer::allocate(size_t bytes, const std::string& what) {
  HugeBuffer b;
  if (bytes == 0) return b;
  const size_t len = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return err(what, ": cannot allocate ", bytes, " bytes: ", std::strerror(errno));
  // Advice only: without transparent huge pages these are ordinary pages.
  (void)madvise(p, len, MADV_HUGEPAGE);
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = bytes;
  b.mapped_ = len;
  return b;
}

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, mapped_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

HugeBuffer::~HugeBuffer() {
  if (data_) munmap(data_, mapped_);
}

Status HugeBuffer::seal() {
  if (data_ && mprotect(data_, mapped_, PROT_READ) != 0)
    return err("cannot make memory read-only: ", std::strerror(errno));
  return {};
}

uint8_t* HugeBuffer::release() {
  size_ = mapped_ = 0;
  return std::exchange(data_, nullptr);
}

}  // namespace duet
