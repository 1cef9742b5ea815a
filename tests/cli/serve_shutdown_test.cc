// Graceful shutdown of `duet serve` as a process: SIGTERM with streams in
// flight lets them finish (or, past --shutdown-timeout, ends them with an
// error event and [DONE]) and exits 0; a second signal exits at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "server/server_harness.h"
#include "test_util.h"

extern char** environ;

namespace duet::testing {
namespace {

// `duet serve --port 0 ARGS` with its stderr collected by a thread (so the
// pipe never fills); killed on destruction if still running.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {duet_binary(), "serve", "-m",
                                     shared_path("models/stories260K/stories260K.gguf"), "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    if (posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) {
        std::lock_guard lock(mu_);
        log_.append(buf, static_cast<size_t>(n));
      }
      close(fd);
    });
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
  }

  // The port it printed at start; 0 if none within 20 s.
  int port() {
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard lock(mu_);
        const size_t at = log_.find("http://127.0.0.1:");
        if (at != std::string::npos && log_.find(' ', at) != std::string::npos)
          return std::stoi(log_.substr(at + 17));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }
  void signal(int sig) { kill(pid_, sig); }
  // The exit status (128 + signal if killed by one); -1 if still running
  // after `seconds`.
  int wait_exit(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  std::string log() {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::thread reader_;
  std::mutex mu_;
  std::string log_;
};

std::unique_ptr<RawSocket> start_stream(int port, int max_tokens) {
  const nlohmann::json body = {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens},
                               {"ignore_eos", true}, {"stream", true}};
  const std::string b = body.dump();
  auto sock = std::make_unique<RawSocket>(port, 30);
  sock->send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(b.size()) + "\r\n\r\n" + b);
  return sock;
}

TEST(ServeShutdown, SigtermLetsRunningStreamsFinishAndExitsZero) {
  ServeProcess p({"-t", "1", "--shutdown-timeout", "30"});
  const int port = p.port();
  ASSERT_GT(port, 0) << p.log();
  std::vector<std::unique_ptr<RawSocket>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(start_stream(port, 100));
  for (auto& s : streams) ASSERT_NE(s->read_until("data: ").find("data: "), std::string::npos);
  p.signal(SIGTERM);
  for (auto& s : streams) {
    const std::string rest = s->read_until("data: [DONE]");
    EXPECT_NE(rest.find("\"finish_reason\":\"length\""), std::string::npos) << rest.substr(0, 300);
    EXPECT_NE(rest.find("data: [DONE]"), std::string::npos);
    EXPECT_EQ(rest.find("\"error\""), std::string::npos);
  }
  EXPECT_EQ(p.wait_exit(20), 0) << p.log();
}

TEST(ServeShutdown, StreamsPastTheGraceGetAFinalErrorEventThenExitZero) {
  ServeProcess p({"-t", "1", "--ctx", "4096", "--shutdown-timeout", "0.3"});
  const int port = p.port();
  ASSERT_GT(port, 0) << p.log();
  std::vector<std::unique_ptr<RawSocket>> streams;
  for (int i = 0; i < 2; ++i) streams.push_back(start_stream(port, 4000));
  for (auto& s : streams) ASSERT_NE(s->read_until("data: ").find("data: "), std::string::npos);
  p.signal(SIGTERM);
  for (auto& s : streams) {
    const std::string rest = s->read_until("data: [DONE]");
    const size_t err = rest.find("data: {\"error\"");
    ASSERT_NE(err, std::string::npos) << rest.substr(0, 300);
    EXPECT_NE(rest.find("server_shutting_down", err), std::string::npos);
    EXPECT_NE(rest.find("data: [DONE]", err), std::string::npos);
  }
  EXPECT_EQ(p.wait_exit(20), 0) << p.log();
}

// While a drain waits on running streams, the port still answers: /health
// says 503 shutting_down (a load balancer's check must not be refused) and
// a new request is a 503 with Retry-After.
TEST(ServeShutdown, DuringTheGraceHealthIs503AndNewRequestsAreRefused) {
  ServeProcess p({"-t", "1", "--ctx", "4096", "--shutdown-timeout", "600"});
  const int port = p.port();
  ASSERT_GT(port, 0) << p.log();
  auto stream = start_stream(port, 4000);
  ASSERT_NE(stream->read_until("data: ").find("data: "), std::string::npos);
  p.signal(SIGTERM);
  std::string health;
  for (int i = 0; i < 200 && health.find("shutting_down") == std::string::npos; ++i) {
    RawSocket s(port);
    ASSERT_TRUE(s.ok()) << "the port refused a connection during the grace";
    s.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    health = s.read_until("}");
    if (health.find("shutting_down") == std::string::npos)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status_line(health), "HTTP/1.1 503 Service Unavailable") << health;
  RawSocket s(port);
  ASSERT_TRUE(s.ok());
  s.send_all(raw_post("/v1/completions", R"({"prompt": "a", "max_tokens": 1})"));
  const std::string refused = s.read_all();
  EXPECT_EQ(status_line(refused), "HTTP/1.1 503 Service Unavailable") << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(refused.find("server_shutting_down"), std::string::npos);
  stream.reset();  // the client leaves: its request is cancelled and the drain ends
  EXPECT_EQ(p.wait_exit(20), 0) << p.log();
}

TEST(ServeShutdown, ASecondSignalExitsAtOnce) {
  ServeProcess p({"-t", "1", "--ctx", "4096", "--shutdown-timeout", "600"});
  const int port = p.port();
  ASSERT_GT(port, 0) << p.log();
  auto stream = start_stream(port, 4000);
  ASSERT_NE(stream->read_until("data: ").find("data: "), std::string::npos);
  p.signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(p.wait_exit(0), -1) << "the first signal only drains";
  p.signal(SIGINT);
  EXPECT_EQ(p.wait_exit(10), 128 + SIGINT) << p.log();
}

}  // namespace
}  // namespace duet::testing
