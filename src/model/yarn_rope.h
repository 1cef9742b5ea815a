// YaRN's RoPE frequencies (Peng et al., "YaRN: Efficient Context Window
// Extension of Large Language Models"): the dims that turn fewer than
// beta_slow times over the trained context are interpolated (divided by the
// factor), those that turn more than beta_fast times keep their frequency,
// and a linear ramp blends the dims between. As transformers' and
// llama.cpp's YaRN compute them.
#pragma once

#include <vector>

#include "formats/model_config.h"

namespace duet {

// Inverse frequencies [rope_dim / 2] for base `base` under `yarn`.
std::vector<float> yarn_inv_freq(int rope_dim, double base, const ModelConfig::Yarn& yarn);

}  // namespace duet
