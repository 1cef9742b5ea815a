// The first half of the update stage: every sequence that sampled this step
// chooses its new tokens from its logits rows — one drawn token, or the
// accepted drafts and one more — and appends them to its tokens. Reporting
// them is the output processor's job, after every sequence has chosen, since
// a report may end sequences.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/speculative.h"
#include "grammar/token_trie.h"
#include "kv/block_pool.h"

namespace duet {

// A token chosen this step, in the order the sequence produced them.
struct ChosenToken {
  Sequence* seq;
  int64_t id;       // seq->id, to notice a sequence ended by an earlier report
  int32_t token;
  int64_t raw = -1; // offset of the raw logits row (for logprobs), or -1
};

struct SpecCounts {
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t passes = 0;  // sequence-steps that verified drafts
};

class TokenSelector {
 public:
  // `speculator` may be null when nothing drafts. Verification frees the
  // target blocks past the accepted tokens in `blocks`.
  const std::vector<ChosenToken>& select(const ModelOutput& out, Speculator* speculator,
                                         BlockPool& blocks, ThreadPool& threads);

  // The logits row a ChosenToken's raw offset points to.
  const float* raw_row(const ChosenToken& t) const {
    return t.raw >= 0 ? raw_rows_.data() + t.raw : nullptr;
  }
  const SpecCounts& spec_counts() const { return spec_counts_; }
  // The vocabulary's token trie, needed once a sequence has a grammar.
  void set_vocabulary(std::shared_ptr<const TokenTrie> trie) { trie_ = std::move(trie); }

 private:
  void presample(const ModelOutput& out, ThreadPool& threads);
  // Sets the logits of tokens the sequence's grammar forbids to -inf.
  void constrain(Sequence* seq, float* row, int32_t n_vocab) const;
  void constrain(const GrammarMatcher& matcher, float* row, int32_t n_vocab) const;
  // The rows a sequence's drafts are verified against, each masked with the
  // grammar after the drafts before it (the speculator kept only drafts the
  // grammar accepts).
  void constrain_drafts(Sequence* seq, float* rows, int32_t n_vocab) const;
  // constrain(), then the sequence's sampler.
  int32_t sample_constrained(Sequence* seq, float* row, int32_t n_vocab) const;
  // Moves the sequence's grammar past its chosen token.
  // `size_after`: seq->tokens.size() counting this token.
  void advance_grammar(Sequence* seq, int32_t token, int32_t size_after) const;

  std::vector<ChosenToken> chosen_;
  std::vector<int32_t> presampled_;  // per out.sequences entry: its token, or -1
  std::vector<int32_t> new_tokens_;  // one sequence's tokens this step
  std::vector<float> raw_rows_;      // rows before the sampler alters them
  SpecCounts spec_counts_;           // since start
  std::shared_ptr<const TokenTrie> trie_;
};

}  // namespace duet
