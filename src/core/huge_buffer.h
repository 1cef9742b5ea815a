// Writable anonymous memory advised as transparent huge pages (2 MiB): for
// weights that are streamed every decode step, where 4 KiB pages would cost
// a TLB miss every 4 KiB. Move-only; unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace duet {

class HugeBuffer {
 public:
  static constexpr size_t kPageBytes = size_t{2} << 20;

  // `what` names the allocation in the error message.
  static Result<HugeBuffer> allocate(size_t bytes, const std::string& what);

  HugeBuffer() = default;
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  ~HugeBuffer();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes mapped (size() rounded up to whole huge pages).
  size_t mapped() const { return mapped_; }
  // Makes the buffer read-only, so a stray write faults instead of silently
  // corrupting weights.
  Status seal();
  // Gives up ownership; the caller munmaps data() with mapped() bytes.
  uint8_t* release();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace duet
