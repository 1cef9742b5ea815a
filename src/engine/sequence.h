// The engine's state for one request: its tokens, how many of them are in
// the KV cache, its blocks (and their prefix-cache hashes), its sampler, its
// output text and its callback.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_text.h"
#include "grammar/grammar_matcher.h"
#include "kv/block_table.h"

namespace duet {

// Speculative decoding's state for one sequence (engine/speculative.h).
struct SpecState {
  int32_t k = 0;                   // tokens to propose this step
  double accept_rate = 0.7;        // running per-token acceptance rate
  int32_t n_draft = 0;             // proposed tokens now at the end of `tokens`
  std::vector<TokenDist> q;        // [n_draft] their draft distributions
  // The draft model's view of this sequence: its blocks in the draft's
  // cache, how many tokens they hold, and a sampler for its distributions.
  BlockTable draft_table;
  int32_t draft_computed = 0;
  std::optional<Sampler> draft_sampler;
};

struct Sequence {
  using Clock = std::chrono::steady_clock;

  Sequence(int64_t id, std::vector<int32_t> prompt, const RequestParams& params,
           TokenCallback on_token)
      : id(id),
        request_id(id),
        pending_choices(std::max(0, params.n - 1)),
        tokens(std::move(prompt)),
        n_prompt(static_cast<int32_t>(tokens.size())),
        params(params),
        sampler(params.sampling),
        on_token(std::move(on_token)),
        submitted(Clock::now()) {
    timings.n_prompt = n_prompt;
    if (params.grammar) grammar.emplace(params.grammar);
  }

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_generated() const { return size() - n_prompt; }
  // Positions this sequence occupies in its block table: a KV window
  // (EngineConfig::kv_window) has dropped n_evicted tokens after the sinks,
  // and moved the later ones down.
  int32_t cache_len() const { return n_computed - n_evicted; }
  // Tokens whose K/V still have to be computed before the next sample.
  int32_t n_pending() const { return size() - n_computed; }
  double seconds_since_submit() const {
    return std::chrono::duration<double>(Clock::now() - submitted).count();
  }

  int64_t id;                   // the engine's key for this sequence
  int64_t request_id;           // the request's: its first choice's id
  int32_t choice = 0;           // of params.n
  // Choices still to fork from this one once its prompt is computed
  // (params.n - 1 for a request's first sequence until it forks).
  int32_t pending_choices = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int32_t n_prompt;
  int32_t n_computed = 0;       // tokens whose K/V have been computed
  int32_t n_evicted = 0;        // of those, dropped from the cache by a KV window
  RequestParams params;
  Sampler sampler;
  TokenCallback on_token;
  BlockTable table;
  std::vector<uint64_t> block_hashes;  // of the full blocks of `table` hashed so far
  std::optional<StopText> text;        // set by the engine
  bool stop_matched = false;           // a stop string ended the text
  bool ended = false;                  // its finishing event has been sent
  Clock::time_point submitted;
  RequestTimings timings;
  SpecState spec;
  std::optional<GrammarMatcher> grammar;  // where the output stands in params.grammar
  // tokens.size() just after the token that completed the grammar (-1:
  // not yet). A step may choose several tokens before any is reported, so
  // the report of each compares its own position with this.
  int32_t grammar_end = -1;
};

}  // namespace duet
