// The model that run, chat, logits, perplexity, bench and serve compute
// with. Under `mpirun -np N` (N > 1) it is this rank's tensor-parallel
// shard (docs/scaling.md), and only rank 0 comes back from loading it.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "model/model.h"

namespace duet::cli {

// Rank 0 (and a plain single process) gets the model. Every other rank
// never returns: it repeats rank 0's forward passes on its shard, with
// `threads` threads, until rank 0's model goes away, then exits the
// process. A load error on any rank fails every rank, and only rank 0
// says why.
Result<std::unique_ptr<Model>> load_target_model(const std::string& path, LoadMode mode, int32_t threads);

}  // namespace duet::cli
