#include "core/remove_on_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace duet {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};

// One file at a time (writers do not nest); a fixed buffer, so the handler
// reads no memory that could be freed under it.
char g_path[4096];
std::atomic<bool> g_armed{false};
bool g_installed[sizeof kSignals / sizeof kSignals[0]];

void on_signal(int sig) {
  if (g_armed.load()) unlink(g_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

// The PID of a name `prefix` + digits, or -1.
long partial_pid(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  long pid = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 1'000'000'000) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

bool process_runs(long pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

std::string partial_path(const std::string& path) { return path + ".partial." + std::to_string(getpid()); }

int remove_stale_partials(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = p.filename().string() + ".partial.";
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = partial_pid(it->path().filename().string(), prefix);
    if (pid < 0 || process_runs(pid)) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

RemoveOnSignal::RemoveOnSignal(const std::string& path) {
  if (path.size() >= sizeof g_path || g_armed.load()) return;
  std::memcpy(g_path, path.c_str(), path.size() + 1);
  g_armed = true;
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    struct sigaction old {};
    sigaction(kSignals[i], nullptr, &old);
    // A program that handles the signal itself (serve drains on SIGTERM)
    // keeps its handler.
    g_installed[i] = old.sa_handler == SIG_DFL;
    if (g_installed[i]) signal(kSignals[i], on_signal);
  }
}

RemoveOnSignal::~RemoveOnSignal() {
  if (!g_armed.load()) return;
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i)
    if (g_installed[i]) signal(kSignals[i], SIG_DFL);
  g_armed = false;
}

}  // namespace duet
