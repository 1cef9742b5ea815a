#include "core/remove_on_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

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

}  // namespace

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
