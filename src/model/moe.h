// Mixture-of-experts FFN layers (Mixtral, Qwen3-MoE): a router picks each
// token's top-k experts, and the layer's output is the routing-weighted sum
// of those experts' gated FFNs. Only the chosen experts' weights are read,
// and each expert once for all the batch's tokens routed to it (a grouped
// matrix product per expert), so a step costs the active experts' bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace duet {

// A batch's tokens grouped by expert: expert e's are entries
// [offset[e], offset[e + 1]) of rows (ascending batch rows) and weights.
struct ExpertRoutes {
  std::vector<int32_t> offset;
  std::vector<int32_t> rows;
  std::vector<float> weights;
  // [n][k]: row i's entries of rows/weights, in ascending expert order (so
  // a row sums its experts' outputs in one order whatever the batch).
  std::vector<int32_t> entries;
  // Scratch kept between calls, so steady-state decode allocates nothing.
  std::vector<int32_t> chosen, order, fill;
  std::vector<float> chosen_weight, prob;
  int32_t count(int32_t e) const { return offset[static_cast<size_t>(e) + 1] - offset[static_cast<size_t>(e)]; }
};

// Routes n tokens from their router logits [n][n_experts]: softmax over all
// experts, the k most probable (the lower index on a tie), their
// probabilities renormalised to sum to 1 when `renormalize` (Mixtral's
// softmax over the top-k logits is the same thing).
void route_tokens(const float* logits, int32_t n, int32_t n_experts, int32_t k, bool renormalize,
                  ExpertRoutes& out);

}  // namespace duet
