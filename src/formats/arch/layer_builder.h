// The parts most layers are made of, for the records' layer_tensors:
// attention with q, k and v (or fused), its biases and q/k norms; a dense
// gated FFN or a mixture of experts (with a shared expert); the norms where
// the family's traits put them. A family whose layer is the usual one in
// some arrangement says which with its traits and names, and standard_layer
// builds it.
#pragma once

#include <string>
#include <vector>

#include "formats/arch/arch.h"

namespace duet {

// Hugging Face's names for a mixture's tensors, under model.layers.L.
struct HfExpertNames {
  std::string router = "mlp.gate.weight";
  std::string experts = "mlp.experts.";  // then E.
  std::string gate = "gate_proj.weight", up = "up_proj.weight", down = "down_proj.weight";
  std::string shared = "mlp.shared_expert.";   // then gate_proj.weight ...
  std::string shared_router;                   // empty: the shared expert is not gated
};

class LayerBuilder {
 public:
  LayerBuilder(const ModelConfig& c, int layer);

  const ModelConfig& config() const { return c_; }
  int layer() const { return layer_; }

  // An F32 vector of n elements (a norm's weights get the family's 1 + w on import).
  LayerBuilder& norm(Role role, const std::string& gguf, const std::string& hf, int64_t n);
  LayerBuilder& matrix(Role role, const std::string& gguf, const std::string& hf, int64_t in, int64_t out);
  LayerBuilder& bias(Role role, const std::string& gguf, const std::string& hf, int64_t n);
  // n_experts matrices of `out` rows of `in`.
  LayerBuilder& experts(Role role, const std::string& gguf_stacked, const std::string& gguf_expert,
                        const std::string& hf_prefix, const std::string& hf, int64_t in, int64_t out);
  // The last tensor added: rows of `heads` heads permuted on HF import (where
  // the family's traits say so); adds into the residual stream; optional.
  LayerBuilder& permuted(int32_t heads);
  LayerBuilder& residual();
  LayerBuilder& optional();

  std::vector<LayerTensor> take() { return std::move(tensors_); }

 private:
  const ModelConfig& c_;
  int layer_;
  std::vector<LayerTensor> tensors_;
};

// q, k, v (fused for Phi-3) with their biases and q/k norms, then the
// output projection.
void add_attention(LayerBuilder& b);
// The FFN: dense (gate and up fused for Phi-3), or this layer's experts.
void add_ffn(LayerBuilder& b, const HfExpertNames& names);
// The layer of norms (where the traits put them), attention and FFN.
std::vector<LayerTensor> standard_layer(const ModelConfig& c, int layer, const HfExpertNames& names = {});

}  // namespace duet
