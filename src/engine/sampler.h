// Chooses the next token from a row of logits: penalties, then greedy or
// temperature sampling restricted by top-k, top-p and min-p, from a seeded
// RNG (same seed, same output). The distribution it draws from is available
// on its own, for speculative decoding's acceptance test.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace duet {

struct TokenBias {
  int32_t token;
  float bias;  // [-100, 100]
};

struct SamplingParams {
  float temperature = 0.8f;      // <= 0: greedy
  int32_t top_k = 40;            // <= 0: off
  float top_p = 0.95f;           // >= 1: off
  float min_p = 0.05f;           // <= 0: off
  float repeat_penalty = 1.0f;   // 1: off (llama.cpp's multiplicative rule)
  int32_t repeat_last_n = 64;    // tokens the penalties look back over
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  // OpenAI's logit_bias: added to a token's logit before everything else;
  // -100 bans the token, 100 forces it (the others are banned while a
  // forced token is possible).
  std::vector<TokenBias> logit_bias;

  static SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }
};

// One token of a sparse distribution; the probabilities of a list sum to 1.
struct TokenProb {
  int32_t id;
  double p;
};
using TokenDist = std::vector<TokenProb>;

// Probability of `id` in `dist` (0 when absent).
double prob_of(const TokenDist& dist, int32_t id);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks a token from logits[n_vocab]; `history` is the sequence so far
  // (prompt and output) for the penalties. logits is modified in place.
  int32_t sample(float* logits, int32_t n_vocab, std::span<const int32_t> history);

  // The distribution sample() draws from: one token with p = 1 when greedy.
  // The most likely come first and in order (at least kSortedHead of them,
  // and all that a top-k, top-p or min-p cut looked at); the unlikely rest
  // follow in no particular order. logits is modified in place.
  void distribution(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                    TokenDist& out);
  // A token drawn from `dist` with this sampler's RNG.
  int32_t draw(const TokenDist& dist);
  // Uniform in [0, 1) from this sampler's RNG.
  double uniform();

  const SamplingParams& params() const { return params_; }

 private:
  void apply_bias(float* logits, int32_t n_vocab) const;
  void apply_penalties(float* logits, int32_t n_vocab, std::span<const int32_t> history);
  void scale(const float* logits, int32_t n_vocab);
  void select_head();
  bool in_tail(size_t id) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  static constexpr size_t kSortedHead = 64;
  struct Candidate {
    float logit;
    int32_t id;
  };
  std::vector<float> scaled_;          // logits / temperature, by id
  std::vector<double> weights_;        // exp(scaled_ - max), by id
  std::vector<Candidate> head_;        // select_head()'s buffer
  std::vector<Candidate> candidates_;  // reused across calls
  std::vector<int32_t> counts_;        // per-token counts in the penalty window
  TokenDist dist_;                     // sample()'s distribution, reused
};

}  // namespace duet
