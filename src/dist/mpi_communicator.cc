#include "dist/mpi_communicator.h"

#include <mpi.h>

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
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(float* x, size_t n) override {
    for (size_t done = 0; done < n;) {
      const int count = chunk(n - done);
      MPI_Allreduce(MPI_IN_PLACE, x + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      done += static_cast<size_t>(count);
    }
  }

  // Non-blocking, then polled: a blocking MPI_Bcast spins its core at 100%
  // for as long as rank 0 has nothing to send. The poll spins for the
  // first millisecond (a decode step's message is that close behind the
  // last), then sleeps 50 µs between polls, and 1 ms once rank 0 has been
  // quiet for 50 ms (a server between requests).
  void broadcast(void* data, size_t bytes) override {
    auto* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      const int count = chunk(bytes - done);
      MPI_Request req;
      MPI_Ibcast(p + done, count, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
      wait(req);
      done += static_cast<size_t>(count);
    }
  }

  bool all_ok(bool ok) override {
    int v = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return v == 1;
  }

 private:
  static int chunk(size_t left) {
    return static_cast<int>(std::min<size_t>(left, static_cast<size_t>(std::numeric_limits<int>::max())));
  }
  static void wait(MPI_Request& req) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    int done = 0;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done) {
      const auto waited = clock::now() - start;
      if (waited > std::chrono::milliseconds(50))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else if (waited > std::chrono::milliseconds(1))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int rank_ = 0, size_ = 1;
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
