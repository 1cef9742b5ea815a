// Llama 1/2/3 (and TinyLlama, Mistral v0.1, Mixtral): the reference layer.
// Pre-norms, q/k/v with optional biases, SwiGLU, RoPE over adjacent pairs
// in GGUF (so Hugging Face's rotate-half q and k rows are permuted on
// import). Mixtral is this architecture with experts in every FFN; GGUF
// files of Mistral models may name it "mistral", which is the same record.
#include "formats/arch/arch.h"
#include "formats/arch/layer_builder.h"
#include "formats/hf_config.h"
#include "formats/hf_json.h"

namespace duet {
namespace {

using namespace hf_json;

// MistralConfig's window is 4096 unless set; null turns it off.
Status read_mistral_hf(const json& j, const std::string& src, HfConfig& c) {
  c.model.sliding_window = 4096;
  const auto it = j.find("sliding_window");
  if (it != j.end() && it->is_null()) c.model.sliding_window = 0;
  return read_int(j, "sliding_window", src, 1, 1 << 24, &c.model.sliding_window);
}

// Mixtral: num_local_experts (8) of intermediate_size, each token's top
// num_experts_per_tok (2), in every layer; a window only where given.
Status read_mixtral_hf(const json& j, const std::string& src, HfConfig& c) {
  ModelConfig& m = c.model;
  m.n_experts = 8;
  m.n_experts_used = 2;
  DUET_TRY(read_expert_counts(j, "num_local_experts", src, &m.n_experts, &m.n_experts_used));
  m.expert_ffn_dim = m.ffn_dim;
  return read_int(j, "sliding_window", src, 1, 1 << 24, &m.sliding_window);
}

// Mixtral's names for its mixture (block_sparse_moe, w1 / w3 / w2).
std::vector<LayerTensor> llama_layer(const ModelConfig& c, int layer) {
  HfExpertNames mixtral;
  mixtral.router = "block_sparse_moe.gate.weight";
  mixtral.experts = "block_sparse_moe.experts.";
  mixtral.gate = "w1.weight";
  mixtral.up = "w3.weight";
  mixtral.down = "w2.weight";
  return standard_layer(c, layer, mixtral);
}

ArchTraits llama_traits() {
  ArchTraits t;
  t.rope_layout = RopeLayout::kNormal;
  t.attn_bias = AttnBias::kIfPresent;
  t.hf_permute_qk = true;
  return t;
}

}  // namespace

ArchRecord llama_record() {
  return {.arch = Arch::kLlama,
          .gguf_name = "llama",
          .hf_classes = {{"LlamaForCausalLM", nullptr},
                         {"MistralForCausalLM", read_mistral_hf},
                         {"MixtralForCausalLM", read_mixtral_hf}},
          .traits = llama_traits(),
          .layer_tensors = llama_layer};
}

ArchRecord mistral_record() {
  ArchRecord r = llama_record();
  r.arch = Arch::kMistral;
  r.gguf_name = "mistral";
  r.hf_classes = {};  // a Mistral folder converts to "llama", as llama.cpp's converter writes it
  return r;
}

}  // namespace duet
