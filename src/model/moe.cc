#include "model/moe.h"

#include <algorithm>
#include <cmath>

namespace duet {

void route_tokens(const float* logits, int32_t n, int32_t n_experts, int32_t k, bool renormalize,
                  ExpertRoutes& out) {
  const auto ne = static_cast<size_t>(n_experts), uk = static_cast<size_t>(k);
  std::vector<int32_t>& chosen = out.chosen;
  std::vector<float>& weight = out.chosen_weight;
  std::vector<float>& prob = out.prob;
  std::vector<int32_t>& order = out.order;
  chosen.resize(static_cast<size_t>(n) * uk);
  weight.resize(chosen.size());
  prob.resize(ne);
  order.resize(ne);
  out.offset.assign(ne + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    const float* z = logits + static_cast<size_t>(i) * ne;
    const float top = *std::max_element(z, z + ne);
    float sum = 0.0f;
    for (size_t e = 0; e < ne; ++e) sum += prob[e] = std::exp(z[e] - top);
    for (size_t e = 0; e < ne; ++e) order[e] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return prob[static_cast<size_t>(a)] > prob[static_cast<size_t>(b)] ||
             (prob[static_cast<size_t>(a)] == prob[static_cast<size_t>(b)] && a < b);
    });
    float picked = 0.0f;
    for (size_t j = 0; j < uk; ++j) picked += prob[static_cast<size_t>(order[j])];
    const float scale = renormalize ? 1.0f / picked : 1.0f / sum;
    for (size_t j = 0; j < uk; ++j) {
      const size_t at = static_cast<size_t>(i) * uk + j;
      chosen[at] = order[j];
      weight[at] = prob[static_cast<size_t>(order[j])] * scale;
      ++out.offset[static_cast<size_t>(order[j]) + 1];
    }
  }
  for (size_t e = 0; e < ne; ++e) out.offset[e + 1] += out.offset[e];
  out.rows.resize(chosen.size());
  out.weights.resize(chosen.size());
  std::vector<int32_t>& fill = out.fill;
  fill.assign(out.offset.begin(), out.offset.end() - 1);
  out.entries.resize(chosen.size());
  for (size_t at = 0; at < chosen.size(); ++at) {
    const auto slot = static_cast<size_t>(fill[static_cast<size_t>(chosen[at])]++);
    out.rows[slot] = static_cast<int32_t>(at / uk);
    out.weights[slot] = weight[at];
    out.entries[at] = static_cast<int32_t>(slot);
  }
  // Entries are grouped by ascending expert: sorting a row's slots orders
  // its experts.
  for (size_t i = 0; i < static_cast<size_t>(n); ++i)
    std::sort(out.entries.begin() + static_cast<std::ptrdiff_t>(i * uk),
              out.entries.begin() + static_cast<std::ptrdiff_t>((i + 1) * uk));
}

}  // namespace duet
