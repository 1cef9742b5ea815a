#include "cli/page_in.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "cli/progress.h"

namespace duet::cli {

namespace {

constexpr size_t kChunk = size_t{8} << 20;

}  // namespace

void page_in_with_progress(const std::string& path, int64_t min_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < min_bytes) {
    close(fd);
    return;
  }
  ProgressBar bar("load", static_cast<double>(st.st_size) / (1 << 20), "MiB");
  if (bar.shown()) {
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    std::vector<char> buf(kChunk);
    int64_t done = 0;
    for (ssize_t n; (n = pread(fd, buf.data(), buf.size(), done)) > 0;) {
      done += n;
      bar.update(static_cast<double>(done) / (1 << 20));
    }
  }
  close(fd);
}

}  // namespace duet::cli
