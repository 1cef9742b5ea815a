// An interrupt while a RemoveOnSignal is alive removes its file and still
// ends the process by that signal; once it is gone, the signal's default
// action is back and the file stays.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/remove_on_signal.h"
#include "test_util.h"

namespace duet {
namespace {

// Runs `body` in a child and returns the signal that ended it (0: none).
template <class Body>
int child_signal(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

TEST(RemoveOnSignal, AnInterruptRemovesTheFileAndStillEndsTheProcess) {
  testing::TempDir dir;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const std::string path = dir.file("model.gguf.partial");
    { std::ofstream(path) << "half"; }
    EXPECT_EQ(child_signal([&] {
                const RemoveOnSignal guard(path);
                raise(sig);
              }),
              sig);
    EXPECT_FALSE(std::filesystem::exists(path)) << strsignal(sig);
  }
}

TEST(RemoveOnSignal, GoneItLeavesTheFileAndTheDefaultAction) {
  testing::TempDir dir;
  const std::string path = dir.file("model.gguf");
  { std::ofstream(path) << "whole"; }
  EXPECT_EQ(child_signal([&] {
              { const RemoveOnSignal guard(path); }
              raise(SIGINT);
            }),
            SIGINT);
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(RemoveOnSignal, AProgramsOwnHandlerIsKept) {
  testing::TempDir dir;
  const std::string path = dir.file("model.gguf.partial");
  { std::ofstream(path) << "half"; }
  EXPECT_EQ(child_signal([&] {
              signal(SIGTERM, SIG_IGN);
              const RemoveOnSignal guard(path);
              raise(SIGTERM);  // ignored, as the program asked
            }),
            0);
  EXPECT_TRUE(std::filesystem::exists(path));
}

// What a kill -9 leaves (no handler runs): the next writer of the same
// path removes the temporaries of writers that no longer run, and only those.
TEST(RemoveOnSignal, StalePartialsOfEndedWritersAreRemoved) {
  testing::TempDir dir;
  const std::string path = dir.file("model.gguf");
  const pid_t ended = fork();
  if (ended == 0) _exit(0);
  ASSERT_EQ(waitpid(ended, nullptr, 0), ended);
  const std::string dead = path + ".partial." + std::to_string(ended);
  const std::string alive = partial_path(path);
  const std::string other = dir.file("other.gguf.partial.1");  // another file's
  const std::string odd = path + ".partial.12x";                // not a writer's name
  for (const std::string& f : {dead, alive, other, odd}) std::ofstream(f) << "half";
  EXPECT_EQ(remove_stale_partials(path), 1);
  EXPECT_FALSE(std::filesystem::exists(dead));
  for (const std::string& f : {alive, other, odd}) EXPECT_TRUE(std::filesystem::exists(f)) << f;
  EXPECT_EQ(alive, path + ".partial." + std::to_string(getpid()));
}

}  // namespace
}  // namespace duet
