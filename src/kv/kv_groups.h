// Which layers share a block table (vLLM's hybrid KV cache manager). When
// some layers attend over a sliding window and others over everything
// (Gemma 2: every other layer; Gemma 3: five in six), a single table would
// keep the whole sequence for every layer. Instead the layers form groups
// of `layers_per_block` layers of one window each; a block of the pool holds
// kBlockTokens tokens of one group's layers, and a sequence holds a list of
// blocks per group, so a windowed group's blocks are freed behind its
// window while a global group keeps its own. Every group has the same
// number of layer slots (the last group of a window may leave some empty),
// so every block is the same size and one pool serves all groups.
#pragma once

#include <cstdint>
#include <vector>

namespace duet {

struct KvGroups {
  int32_t layers_per_block = 0;
  std::vector<int32_t> window;  // [group] tokens its layers attend back; 0: all (such groups first)
  std::vector<int32_t> group;   // [layer] the group it belongs to
  std::vector<int32_t> slot;    // [layer] its place among its group's layers

  int32_t n_groups() const { return static_cast<int32_t>(window.size()); }

  // From each layer's window (0: full attention; empty: 0 for every layer).
  // Layers that all share one window form one group of all the layers.
  static KvGroups of(int32_t n_layers, const std::vector<int32_t>& layer_window);
};

}  // namespace duet
