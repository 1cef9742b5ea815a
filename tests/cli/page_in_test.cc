// The load bar: drawn on a terminal (a pseudo-terminal stands in for one
// as stderr), and nothing at all on a pipe.
#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "cli/page_in.h"
#include "test_util.h"

namespace duet::cli {
namespace {

std::string make_file(const testing::TempDir& dir, size_t bytes) {
  const std::string path = dir.file("weights.bin");
  testing::write_file(path, std::string(bytes, 'w'));
  return path;
}

// What page_in_with_progress writes to stderr while stderr is `fd`.
std::string stderr_while(int fd, const std::string& path, int64_t min_bytes, int read_fd) {
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  page_in_with_progress(path, min_bytes);
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::string out;
  char buf[4096];
  fcntl(read_fd, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = read(read_fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(PageIn, DrawsABarOnATerminal) {
  testing::TempDir dir;
  const std::string path = make_file(dir, 3 << 20);
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  const std::string out = stderr_while(slave, path, 0, master);
  close(master);
  EXPECT_NE(out.find("load"), std::string::npos) << out;
  EXPECT_NE(out.find("MiB/s"), std::string::npos) << out;
  EXPECT_NE(out.find("100%"), std::string::npos) << out;
}

TEST(PageIn, SilentOnAPipeAndForSmallFiles) {
  testing::TempDir dir;
  const std::string path = make_file(dir, 3 << 20);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_EQ(stderr_while(p[1], path, 0, p[0]), "");
  close(p[0]);
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  EXPECT_EQ(stderr_while(slave, path, 4 << 20, master), "");  // under min_bytes
  close(master);
}

}  // namespace
}  // namespace duet::cli
