// The OLMo family: q and k normed over all heads of a row at once (one
// weight of q_dim / kv_dim) before RoPE, on Llama's projections without
// biases. OLMoE: a mixture of experts in every layer, its weights not
// renormalised unless the file says. OLMo 2: no norm before attention or
// the FFN, one after each (their outputs normed, then added).
#include "formats/arch/arch.h"
#include "formats/arch/layer_builder.h"
#include "formats/hf_config.h"
#include "formats/hf_json.h"

namespace duet {
namespace {

using namespace hf_json;

// OlmoeConfig: num_experts 64 of intermediate_size, top 8, norm_topk_prob off.
Status read_olmoe_hf(const json& j, const std::string& src, HfConfig& c) {
  ModelConfig& m = c.model;
  m.n_experts = 64;
  m.n_experts_used = 8;
  DUET_TRY(read_expert_counts(j, "num_experts", src, &m.n_experts, &m.n_experts_used));
  m.expert_ffn_dim = m.ffn_dim;
  m.expert_weights_norm = false;
  return read_bool(j, "norm_topk_prob", src, &m.expert_weights_norm);
}

std::vector<LayerTensor> olmo_layer(const ModelConfig& c, int layer) { return standard_layer(c, layer); }

ArchTraits olmo_traits() {
  ArchTraits t;
  t.qk_norm = QkNorm::kAcrossHeads;
  t.hf_rms_eps = 1e-5f;
  return t;
}

}  // namespace

ArchRecord olmoe_record() {
  ArchTraits t = olmo_traits();
  t.experts = Experts::kEveryLayer;
  t.expert_weights_norm = false;
  return {.arch = Arch::kOlmoe, .gguf_name = "olmoe", .hf_classes = {{"OlmoeForCausalLM", read_olmoe_hf}},
          .traits = t, .layer_tensors = olmo_layer};
}

ArchRecord olmo2_record() {
  ArchTraits t = olmo_traits();
  t.norms = NormPlacement::kPostOnly;
  return {.arch = Arch::kOlmo2, .gguf_name = "olmo2", .hf_classes = {{"Olmo2ForCausalLM", nullptr}},
          .traits = t, .layer_tensors = olmo_layer};
}

}  // namespace duet
