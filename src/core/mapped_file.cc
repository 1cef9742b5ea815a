#include "core/mapped_file.h"

#include "core/huge_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace duet {

namespace {

// Reads `size` bytes of fd into a fresh huge-page buffer; the mapping is
// read-only once filled. *mapped gets the bytes to munmap.
Result<const uint8_t*> read_into_memory(int fd, const std::string& path, size_t size, size_t* mapped) {
  DUET_ASSIGN(HugeBuffer buf, HugeBuffer::allocate(size, path));
  uint8_t* dst = buf.data();
  for (size_t done = 0; done < size;) {
    const size_t chunk = size - done < (size_t{1} << 30) ? size - done : size_t{1} << 30;
    const ssize_t n = pread(fd, dst + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) return err(path, ": cannot read: ", std::strerror(errno));
      return err(path, ": file shrank while reading (", done, " of ", size, " bytes)");
    }
    done += static_cast<size_t>(n);
  }
  DUET_TRY(buf.seal());
  *mapped = buf.mapped();
  return static_cast<const uint8_t*>(buf.release());
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path, LoadMode mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return err(path, ": cannot stat: ", std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return err(path, ": is a directory");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0 && mode == LoadMode::kRead) {
    Result<const uint8_t*> data = read_into_memory(fd, path, f.size_, &f.mapped_);
    ::close(fd);
    if (!data.ok()) return data.error();
    f.data_ = *data;
    return f;
  }
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return err(path, ": cannot mmap: ", std::strerror(e));
    }
    f.data_ = static_cast<const uint8_t*>(p);
    f.mapped_ = f.size_;
    f.from_file_ = true;
  }
  ::close(fd);
  return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)), from_file_(std::exchange(o.from_file_, false)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    from_file_ = std::exchange(o.from_file_, false);
    path_ = std::move(o.path_);
  }
  return *this;
}

void MappedFile::release() {
  if (data_) munmap(const_cast<uint8_t*>(data_), mapped_);
  data_ = nullptr;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::drop_pages(const void* p, size_t n) const {
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  const auto lo = reinterpret_cast<uintptr_t>(data_);
  if (!from_file_ || begin < lo || end > lo + size_) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace duet
