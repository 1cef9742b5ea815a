// Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a cheap
// drafter proposes k tokens, the target scores all of them in one forward
// pass, and the rejection rule below keeps a prefix of them so that every
// output token is distributed exactly as the target alone would sample it.
// Two drafters: a smaller model with the same vocabulary (its own paged KV
// cache, kept in step and truncated on rejection), and prompt lookup, which
// proposes what followed the latest earlier occurrence of the last n tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "engine/scheduler_output.h"
#include "engine/sequence.h"
#include "grammar/token_trie.h"
#include "kv/block_pool.h"
#include "model/model.h"

namespace duet {

struct SpecConfig {
  Model* draft = nullptr;  // a draft model with the target's vocabulary; not owned
  int32_t lookup = 0;      // longest n-gram prompt lookup matches (0: off)
  int32_t draft_max = 5;   // most tokens proposed for a sequence in one step

  bool enabled() const { return draft != nullptr || lookup > 0; }
};

// The outcome of testing one drafted token against the target.
struct Verdict {
  bool accepted;
  int32_t token;  // the draft token, or the replacement drawn on rejection
};

// Accepts draft token d with probability min(1, p(d)/q(d)); on rejection
// draws from max(0, p - q) renormalized. q empty means the draft was
// deterministic (q = 1 at d). `residual` is scratch.
Verdict accept_or_resample(const TokenDist& p, const TokenDist& q, int32_t d, Sampler& rng,
                           TokenDist& residual);

// Tokens to propose next from the running per-token acceptance rate: the
// smallest k whose chance of all k being accepted falls below 1/4.
int32_t adaptive_draft_len(double accept_rate, int32_t draft_max);

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends up to seq->spec.k proposed tokens to each sequence's tokens,
  // with each one's draft distribution in seq->spec.q (empty: deterministic),
  // and sets seq->spec.n_draft.
  virtual Status propose(std::span<Sequence* const> seqs, ThreadPool& pool) = 0;
  // The first n tokens of seq are final; draft state past them is dropped.
  virtual void keep(Sequence* /*seq*/, int32_t /*n*/) {}
  // The sequence is gone, or preempted: its draft state is freed.
  virtual void release(Sequence* /*seq*/) {}
  // The drafter's own KV block pool, if it has one.
  virtual const BlockPool* block_pool() const { return nullptr; }
};

std::unique_ptr<Drafter> make_lookup_drafter(int32_t max_ngram);

// A drafter running `draft` with its own KV cache for up to max_seqs
// sequences of ctx tokens. Fails when the vocabularies differ.
Result<std::unique_ptr<Drafter>> make_model_drafter(Model& draft, const Model& target,
                                                    int32_t ctx, int32_t max_seqs,
                                                    int32_t draft_max);

// Speculative decoding as the engine runs it: drafts before scheduling,
// trims what the schedule has no room for, and verifies after the forward
// pass.
class Speculator {
 public:
  Speculator(std::unique_ptr<Drafter> drafter, int32_t draft_max)
      : drafter_(std::move(drafter)), draft_max_(draft_max) {}

  // Drafts for every decoding sequence of `running`. `ctx_room(seq)` is how
  // many more tokens the sequence's context holds.
  template <class Room>
  Status propose(std::span<Sequence* const> running, Room ctx_room, ThreadPool& pool);
  // Drops the draft tokens each sequence's chunk cannot verify this step.
  void trim(const SchedulerOutput& plan);

  struct Outcome {
    int32_t n_draft;
    int32_t n_accepted;
  };
  // Tests seq's draft tokens against the target's logits `rows` (one per
  // draft token, then one past the last) in order, stopping at the first
  // rejection. Leaves seq->tokens ending in the accepted drafts and one
  // more token drawn by the target (a replacement, or a bonus when all were
  // accepted); `out` gets those tokens and `raw` the rows it read when the
  // request wants logprobs. Frees the target blocks past the kept tokens.
  Outcome verify(Sequence* seq, int32_t n_vocab, float* rows, BlockPool& pool,
                 std::vector<int32_t>& out, std::vector<float>& raw);

  void release(Sequence* seq) { drafter_->release(seq); }
  // The vocabulary's bytes, for checking drafts of sequences with a grammar.
  void set_vocabulary(std::shared_ptr<const TokenTrie> trie) { trie_ = std::move(trie); }
  const BlockPool* block_pool() const { return drafter_->block_pool(); }

 private:
  // Drops the drafts from the first one the sequence's grammar rejects (an
  // end token ends them too): the target could never accept it.
  void keep_grammatical_drafts(Sequence* seq);
  // Drops all but the first n drafts.
  void cut_drafts(Sequence* seq, int32_t n);

  std::unique_ptr<Drafter> drafter_;
  std::shared_ptr<const TokenTrie> trie_;
  int32_t draft_max_;
  std::vector<Sequence*> drafted_;      // this step's
  TokenDist target_dist_, residual_;    // verification scratch
};

template <class Room>
Status Speculator::propose(std::span<Sequence* const> running, Room ctx_room, ThreadPool& pool) {
  drafted_.clear();
  for (Sequence* seq : running) {
    // Only sequences decoding: their one pending token is the last sampled.
    if (seq->n_pending() != 1 || seq->n_generated() == 0) continue;
    const int32_t room = std::min(seq->params.max_tokens - seq->n_generated(), ctx_room(seq)) - 1;
    seq->spec.k = std::min(adaptive_draft_len(seq->spec.accept_rate, draft_max_), room);
    if (seq->spec.k > 0) drafted_.push_back(seq);
  }
  if (drafted_.empty()) return {};
  DUET_TRY(drafter_->propose(drafted_, pool));
  for (Sequence* seq : drafted_)
    if (seq->grammar) keep_grammatical_drafts(seq);
  return {};
}

// The n-gram lookup itself: up to k tokens that followed the latest earlier
// occurrence of the longest suffix of `tokens` (max_ngram down to 1 long).
std::vector<int32_t> lookup_continuation(std::span<const int32_t> tokens, int32_t max_ngram,
                                         int32_t k);

}  // namespace duet
