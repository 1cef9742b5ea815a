// Each supported architecture's LayerBinder: one file per family
// (llama.cc: llama, mistral, qwen2, qwen2moe; qwen3.cc: qwen3, qwen3moe; olmo.cc: olmoe,
// olmo2; gemma.cc: gemma2, gemma3; phi3.cc; deepseek2.cc), all on the shared decoder (model/decoder.h); a
// layer with a router has a mixture-of-experts FFN (model/moe.h).
#pragma once

#include <string>

#include "model/decoder.h"

namespace duet {

Status bind_llama_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
// Llama's layer less its two norms: q, k, v, o, the FFN or experts, biases.
Status bind_llama_projections(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
Status bind_qwen3_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
Status bind_olmoe_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
Status bind_olmo2_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
Status bind_gemma_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
Status bind_phi3_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);
Status bind_deepseek2_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);

// The binder of general.architecture `arch`; nullptr for one duet lacks.
LayerBinder layer_binder(const std::string& arch);

}  // namespace duet
