#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

namespace duet {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    stats_ = std::getenv("DUET_TP_STATS") != nullptr;
  }
  // DUET_TP_STATS=1: each rank's time in the collectives, at exit (what
  // docs/scaling.md's overhead figures come from). The time in an
  // allreduce includes waiting for the slowest rank to arrive.
  ~MpiCommunicator() override {
    if (stats_)
      std::fprintf(stderr, "duet: rank %d: %ld allreduces %.1f ms, %ld broadcasts %.1f ms, %ld gathers %.1f ms\n",
                   rank_, allreduces_, allreduce_s_ * 1e3, broadcasts_, broadcast_s_ * 1e3, gathers_, gather_s_ * 1e3);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(float* x, size_t n) override {
    const Timer t(stats_, allreduce_s_, allreduces_);
    for (size_t done = 0; done < n;) {
      const int count = chunk(n - done);
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, x + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      wait(req, kAllreduceSpin);
      done += static_cast<size_t>(count);
    }
  }

  // Point to point, in chunks of at most INT_MAX floats: a perplexity
  // window's logits of a large vocabulary can pass MPI_Gatherv's int
  // counts and displacements.
  void gather(const float* part, float* all, std::span<const size_t> counts) override {
    const Timer t(stats_, gather_s_, gathers_);
    if (rank_ != 0) {
      chunked(counts[static_cast<size_t>(rank_)], [&](size_t at, int n, MPI_Request* req) {
        MPI_Isend(part + at, n, MPI_FLOAT, 0, kGatherTag, MPI_COMM_WORLD, req);
      });
      return;
    }
    std::copy_n(part, counts[0], all);
    float* to = all + counts[0];
    for (int r = 1; r < size_; ++r) {
      chunked(counts[static_cast<size_t>(r)], [&](size_t at, int n, MPI_Request* req) {
        MPI_Irecv(to + at, n, MPI_FLOAT, r, kGatherTag, MPI_COMM_WORLD, req);
      });
      to += counts[static_cast<size_t>(r)];
    }
  }

  // Non-blocking, then polled (wait()): a blocking MPI_Bcast spins its
  // core at 100% for as long as rank 0 has nothing to send.
  void broadcast(void* data, size_t bytes) override {
    const Timer t(stats_, broadcast_s_, broadcasts_);
    auto* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      const int count = chunk(bytes - done);
      MPI_Request req;
      MPI_Ibcast(p + done, count, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
      wait(req, kBroadcastSpin);
      done += static_cast<size_t>(count);
    }
  }

  bool all_ok(bool ok) override {
    int v = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return v == 1;
  }

 private:
  static constexpr int kGatherTag = 1;
  // n floats in chunks MPI's int counts can name: post(at, count, &req)
  // starts each, which is then waited for.
  template <class Post>
  static void chunked(size_t n, Post post) {
    for (size_t done = 0; done < n;) {
      const int count = chunk(n - done);
      MPI_Request req;
      post(done, count, &req);
      wait(req, kAllreduceSpin);
      done += static_cast<size_t>(count);
    }
  }
  static int chunk(size_t left) {
    return static_cast<int>(std::min<size_t>(left, static_cast<size_t>(std::numeric_limits<int>::max())));
  }
  // Why the collectives poll and nap instead of blocking in MPI: Open MPI's
  // shared-memory transport waits by spinning (and, oversubscribed, by
  // sched_yield), and on a busy machine a yielding rank loses its core for
  // a whole time slice while its peer waits on it: an allreduce then costs
  // milliseconds. A rank that sleeps is woken with priority instead. So:
  // spin for `spin` (a peer a few µs behind is the common case), nap
  // kNap between polls after that, and 1 ms once rank 0 has been quiet for
  // 50 ms (a server between requests).
  static constexpr std::chrono::microseconds kAllreduceSpin{200}, kBroadcastSpin{1000}, kNap{20};
  static void wait(MPI_Request& req, std::chrono::microseconds spin) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    int done = 0;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done) {
      const auto waited = clock::now() - start;
      if (waited > std::chrono::milliseconds(50))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else if (waited > spin)
        std::this_thread::sleep_for(kNap);
    }
  }

  // Adds its lifetime to `seconds` and one to `calls`, when on.
  struct Timer {
    Timer(bool on, double& seconds, long& calls) : on(on), seconds(seconds), calls(calls) {}
    ~Timer() {
      if (!on) return;
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++calls;
    }
    bool on;
    double& seconds;
    long& calls;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  };

  int rank_ = 0, size_ = 1;
  bool stats_ = false;
  double allreduce_s_ = 0, broadcast_s_ = 0, gather_s_ = 0;
  long allreduces_ = 0, broadcasts_ = 0, gathers_ = 0;
};

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

std::unique_ptr<Communicator> mpi_world() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    std::fprintf(stderr, "duet: error: this MPI cannot be called from more than one thread\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::atexit(finalize);
  return std::make_unique<MpiCommunicator>();
}

}  // namespace duet
