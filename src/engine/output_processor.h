// The second half of the update stage: turns a chosen token into what its
// request hears — the released text (stop strings held back), logprobs,
// timings — and decides whether the token ends the request (end of
// generation, a stop string, max_tokens, the context).
#pragma once

#include <cstdint>

#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "tokenizer/tokenizer.h"

namespace duet {

struct TokenOutcome {
  TokenEvent event;
  FinishReason finish = FinishReason::kNone;  // kNone: the request goes on
};

class OutputProcessor {
 public:
  // ctx_limited: a request ends when its tokens fill ctx (false under a KV
  // window, where generation runs past the context).
  OutputProcessor(const Tokenizer& tokenizer, int32_t n_vocab, int32_t ctx, bool ctx_limited)
      : tokenizer_(tokenizer), n_vocab_(n_vocab), ctx_(ctx), ctx_limited_(ctx_limited) {}

  // Reports `token`, already at the end of seq->tokens (accepted drafts may
  // stand after it); raw_logits is its row before sampling, for logprobs.
  TokenOutcome process(Sequence* seq, int32_t token, const float* raw_logits, EngineMetrics& metrics) const;

  // The last event of a request that ended for `reason`.
  TokenEvent finish_event(Sequence* seq, FinishReason reason, const std::string& error) const;

 private:
  const Tokenizer& tokenizer_;
  int32_t n_vocab_;
  int32_t ctx_;
  bool ctx_limited_;
};

}  // namespace duet
