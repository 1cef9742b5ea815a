// Bounded KV memory for long generations: StreamingLLM's window (keep the
// first sinks and the last `window` tokens, re-rotating the kept keys so
// positions stay contiguous) and a model's own sliding windows (blocks
// wholly before a group of layers' window are never read again by them).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "engine/sequence.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace duet {

class KvWindow {
 public:
  // window 0: no StreamingLLM window; the model's sliding windows still apply.
  KvWindow(int32_t window, int32_t sinks) : window_(window), sinks_(sinks) {}

  // Whether generation may run past the context.
  bool unbounded() const { return window_ > 0; }

  // Frees the blocks `seq` no longer needs; returns the tokens evicted from
  // the cache (moved out of the positions the model sees).
  int32_t slide(Sequence* seq, KvCache& cache, Model& model, ThreadPool& pool) const;

 private:
  int32_t window_;
  int32_t sinks_;
};

}  // namespace duet
