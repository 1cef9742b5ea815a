// The steps of a tensor-parallel run (docs/scaling.md). Rank 0 alone owns
// tokenization, scheduling and sampling; before each operation on its KV
// cache (a forward pass, a window's key shift) it broadcasts the operation
// and its inputs, and every other rank repeats it on its own shard and its
// own cache of its heads. The cache's block ids are rank 0's: each
// follower's cache has rank 0's block count and type, so a block table
// means the same slots everywhere. A forward pass that computes logits
// says so: each rank then computes its rows of the vocabulary head, and
// rank 0 gathers them.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "kv/kv_cache.h"
#include "model/batch.h"

namespace duet {

class Model;

// Rank 0: announces a forward pass of `batch` over `cache`, and whether it
// ends in the vocabulary head (`head`: logits wanted, not hidden states).
void lead_forward(Communicator& comm, const Batch& batch, const KvCache& cache, bool head);
// Rank 0: announces Model::shift_keys over `cache`.
void lead_shift_keys(Communicator& comm, const KvCache& cache, const BlockTable& table, int32_t begin, int32_t end,
                     int32_t delta);
// Rank 0: the run is over; the followers return from follow_leader.
void lead_stop(Communicator& comm);

// Every rank but 0: runs what rank 0 announces on `model` (this rank's
// shard), over a KV cache of its own, until rank 0 stops.
Status follow_leader(Model& model, Communicator& comm, ThreadPool& pool);

}  // namespace duet
