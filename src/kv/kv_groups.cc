#include "kv/kv_groups.h"

#include <algorithm>
#include <map>

namespace duet {

KvGroups KvGroups::of(int32_t n_layers, const std::vector<int32_t>& layer_window) {
  const auto window_of = [&](int32_t l) { return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(l)]; };
  std::map<int32_t, std::vector<int32_t>> by_window;  // 0 (full) sorts first
  for (int32_t l = 0; l < n_layers; ++l) by_window[window_of(l)].push_back(l);
  KvGroups g;
  g.group.resize(static_cast<size_t>(n_layers));
  g.slot.resize(static_cast<size_t>(n_layers));
  // The smallest kind sets the block's layer count: every group is that
  // wide, so the fewest slots are left empty.
  g.layers_per_block = n_layers;
  for (const auto& [w, layers] : by_window) g.layers_per_block = std::min(g.layers_per_block, static_cast<int32_t>(layers.size()));
  g.layers_per_block = std::max(g.layers_per_block, 1);
  for (const auto& [w, layers] : by_window) {
    const int32_t first = g.n_groups();
    for (size_t j = 0; j < layers.size(); ++j) {
      const auto l = static_cast<size_t>(layers[j]);
      g.group[l] = first + static_cast<int32_t>(j) / g.layers_per_block;
      g.slot[l] = static_cast<int32_t>(j) % g.layers_per_block;
    }
    const int32_t n = (static_cast<int32_t>(layers.size()) + g.layers_per_block - 1) / g.layers_per_block;
    g.window.insert(g.window.end(), static_cast<size_t>(n), w);
  }
  if (g.window.empty()) g.window.push_back(0);  // no layers: one empty group
  return g;
}

}  // namespace duet
