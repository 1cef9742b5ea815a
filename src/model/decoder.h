// The decoder every supported architecture shares: pre-norm blocks of
// RMSNorm → GQA attention with RoPE → residual → RMSNorm → gated FFN →
// residual, with the variations ModelConfig names (q/k norms, post-norms,
// GeGLU, soft-caps, per-layer sliding windows and RoPE bases). What differs
// per architecture is which tensors a layer has and how they are named or
// fused: its record's inventory (formats/arch/), which bind_layer
// (model/weight_binder.h) walks.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/layer_weights.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace duet {

// `comm` (may be null: one process) as for Model::load.
Result<std::unique_ptr<Model>> load_decoder(GgufFile file, ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                                            Communicator* comm = nullptr);

}  // namespace duet
