// The ranks of a tensor-parallel run and the collectives the forward pass
// needs (docs/scaling.md). Nothing outside src/dist/ knows MPI: the
// decoder calls allreduce_sum and gathers the vocabulary head's logits on
// rank 0, the leader broadcasts each step, and a single process sees one
// rank whose collectives do nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace duet {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank 0 owns tokenization, scheduling and sampling; the others follow.
  bool leads() const { return rank() == 0; }

  // x[i] = the sum over ranks of x[i], on every rank.
  virtual void allreduce_sum(float* x, size_t n) = 0;
  // counts[r] floats from each rank r's `part` into rank 0's `all`, one
  // rank after another in rank order (sum(counts) floats); `all` is not
  // touched on the other ranks (and may be null there). Every rank passes
  // the same counts.
  virtual void gather(const float* part, float* all, std::span<const size_t> counts) = 0;
  // Rank 0's `bytes` bytes at `data` into every rank's `data`. A rank
  // waiting here while rank 0 is idle (a server between requests) sleeps
  // rather than spinning a core.
  virtual void broadcast(void* data, size_t bytes) = 0;
  // True on every rank when `ok` is true on every rank: how the ranks agree
  // that each loaded its shard before any of them starts work.
  virtual bool all_ok(bool ok) = 0;
};

// This process's communicator: every rank of an MPI job of more than one
// process (when duet was built with MPI), else a single rank. MPI is
// initialised on the first call and finalised at exit; a plain run never
// touches it.
Communicator& world();

}  // namespace duet
