// Paths and helpers shared by the C++ tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"

namespace duet::testing {

inline std::string shared_dir() {
  if (const char* e = std::getenv("DUET_SHARED_DIR")) return e;
  return DUET_SHARED_DIR;
}
inline std::string shared_path(const std::string& rel) { return shared_dir() + "/" + rel; }
inline std::string duet_binary() { return DUET_BINARY; }
// The small llama model most end-to-end tests run.
inline std::string stories_gguf() { return shared_path("models/stories260K/stories260K.gguf"); }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "duet-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The message of a result that must be an error; "" and a test failure when
// it is not.
template <class T>
std::string failure_message(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command and captures its output.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs the duet binary with `args` (a shell command line after "duet ").
inline CommandResult run_duet(const std::string& args) { return run_command(duet_binary() + " " + args); }

}  // namespace duet::testing
