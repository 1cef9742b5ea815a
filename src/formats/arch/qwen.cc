// The Qwen family. Qwen2: Llama's layer with q/k/v biases, RoPE over
// (i, i + d/2) pairs (NeoX), so no row is permuted on import. Qwen2-MoE:
// experts on the layers decoder_sparse_step and mlp_only_layers choose, and
// a shared expert gated by sigmoid(x · w). Qwen3: no biases, an RMSNorm
// over each head of q and k; Qwen3-MoE its mixture.
#include <vector>

#include "formats/arch/arch.h"
#include "formats/arch/layer_builder.h"
#include "formats/hf_config.h"
#include "formats/hf_json.h"

namespace duet {
namespace {

using namespace hf_json;

// Qwen slides only from layer max_window_layers on, where use_sliding_window
// says; duet's window covers all layers or none, so a window over some
// layers only is refused.
Status read_qwen_window(const json& j, const std::string& src, HfConfig& c) {
  bool use = false;
  DUET_TRY(read_bool(j, "use_sliding_window", src, &use));
  if (!use) return {};
  int32_t window = 4096, from_layer = 28;
  DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &window));
  DUET_TRY(read_int(j, "max_window_layers", src, 0, 4096, &from_layer));
  if (from_layer == 0) c.model.sliding_window = window;
  else if (from_layer < c.model.n_layers)
    return err(src, ": a sliding window over layers ", from_layer, "..", c.model.n_layers - 1,
               " only (max_window_layers) is not supported");
  return {};
}

// The layers that keep a dense MLP of intermediate_size: those
// decoder_sparse_step skips and those mlp_only_layers names.
Status read_dense_layers(const json& j, const std::string& src, ModelConfig& m) {
  int32_t step = 1;
  DUET_TRY(read_int(j, "decoder_sparse_step", src, 1, 4096, &step));
  std::vector<bool> dense(static_cast<size_t>(m.n_layers), false);
  for (int32_t l = 0; l < m.n_layers; ++l) dense[static_cast<size_t>(l)] = (l + 1) % step != 0;
  if (const json* only = field(j, "mlp_only_layers")) {
    if (!only->is_array()) return err(src, ": \"mlp_only_layers\" must be a list of layer indices");
    for (const json& l : *only) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= m.n_layers)
        return err(src, ": mlp_only_layers names ", l.dump(), ", not a layer of ", m.n_layers);
      dense[static_cast<size_t>(l.get<int64_t>())] = true;
    }
  }
  for (int32_t l = 0; l < m.n_layers; ++l)
    if (dense[static_cast<size_t>(l)]) m.dense_layers.push_back(l);
  return {};
}

// num_experts of moe_intermediate_size (Qwen2-MoE: 60 of 1408, top 4, and
// a shared expert of shared_expert_intermediate_size 5632; Qwen3-MoE: 128
// of 768, top 8); norm_topk_prob off unless given.
Status read_qwen_experts(const json& j, const std::string& src, bool qwen2, HfConfig& c) {
  ModelConfig& m = c.model;
  m.n_experts = qwen2 ? 60 : 128;
  m.n_experts_used = qwen2 ? 4 : 8;
  DUET_TRY(read_expert_counts(j, "num_experts", src, &m.n_experts, &m.n_experts_used));
  m.expert_ffn_dim = qwen2 ? 1408 : 768;
  DUET_TRY(read_int(j, "moe_intermediate_size", src, 1, 8 * kMaxDim, &m.expert_ffn_dim));
  if (qwen2) {
    m.shared_expert_ffn_dim = 5632;
    DUET_TRY(read_int(j, "shared_expert_intermediate_size", src, 1, 8 * kMaxDim, &m.shared_expert_ffn_dim));
  }
  m.expert_weights_norm = false;
  DUET_TRY(read_bool(j, "norm_topk_prob", src, &m.expert_weights_norm));
  DUET_TRY(read_dense_layers(j, src, m));
  return read_qwen_window(j, src, c);
}

Status read_qwen2moe_hf(const json& j, const std::string& src, HfConfig& c) {
  return read_qwen_experts(j, src, true, c);
}
Status read_qwen3moe_hf(const json& j, const std::string& src, HfConfig& c) {
  return read_qwen_experts(j, src, false, c);
}

std::vector<LayerTensor> qwen2moe_layer(const ModelConfig& c, int layer) {
  HfExpertNames names;
  names.shared_router = "mlp.shared_expert_gate.weight";
  return standard_layer(c, layer, names);
}

std::vector<LayerTensor> qwen_layer(const ModelConfig& c, int layer) { return standard_layer(c, layer); }

ArchRecord qwen(Arch a, const char* gguf, const char* hf, HfReader read, ArchTraits t) {
  return {.arch = a, .gguf_name = gguf, .hf_classes = {{hf, read}}, .traits = t, .layer_tensors = qwen_layer};
}

ArchTraits with_biases() {
  ArchTraits t;
  t.attn_bias = AttnBias::kAlways;
  return t;
}

ArchTraits with_qk_norms() {
  ArchTraits t;
  t.qk_norm = QkNorm::kPerHead;
  return t;
}

ArchTraits mixture(ArchTraits t) {
  t.experts = Experts::kRequired;
  return t;
}

}  // namespace

ArchRecord qwen2_record() { return qwen(Arch::kQwen2, "qwen2", "Qwen2ForCausalLM", read_qwen_window, with_biases()); }

// llama.cpp's qwen2moe graph does not renormalise the chosen experts'
// weights; its qwen3moe graph does unless the file says.
ArchRecord qwen2moe_record() {
  ArchRecord r = qwen(Arch::kQwen2Moe, "qwen2moe", "Qwen2MoeForCausalLM", read_qwen2moe_hf, mixture(with_biases()));
  r.traits.expert_weights_norm = false;
  r.layer_tensors = qwen2moe_layer;
  return r;
}

ArchRecord qwen3_record() { return qwen(Arch::kQwen3, "qwen3", "Qwen3ForCausalLM", read_qwen_window, with_qk_norms()); }

ArchRecord qwen3moe_record() {
  return qwen(Arch::kQwen3Moe, "qwen3moe", "Qwen3MoeForCausalLM", read_qwen3moe_hf, mixture(with_qk_norms()));
}

}  // namespace duet
