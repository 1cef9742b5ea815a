// What one model family is, in one place: its names (GGUF
// general.architecture, Hugging Face architectures classes), its traits,
// the hooks that read and write the keys only it has, and the tensors each
// of its layers holds. Everything that differs between architectures is
// here; the readers of GGUF and config.json, the Hugging Face import, the
// weight binding, tensor-parallel sharding, packing and `duet synth` walk
// these records and never test an architecture's name.
//
// Adding a family is a file in this folder and a line in arch_registry.cc
// (docs/adding-a-model.md walks a real one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "formats/arch/arch_id.h"
#include "formats/model_config.h"

namespace duet {

class GgufFile;
class GgufWriter;
struct HfConfig;

// What a layer tensor is to the forward pass (model/layer_weights.h binds
// each to its place).
enum class Role : uint8_t {
  kAttnNorm, kQ, kK, kV, kQkv, kOut, kQBias, kKBias, kVBias, kQNorm, kKNorm, kPostAttnNorm,
  kFfnNorm, kGate, kUp, kGateUp, kDown, kPostFfnNorm,
  kRouter, kExpGate, kExpUp, kExpDown, kSharedGate, kSharedUp, kSharedDown, kSharedRouter,
  kQA, kQANorm, kKvA, kKvANorm, kKvB,
};

// One tensor of layer L, as every reader and writer names and shapes it.
struct LayerTensor {
  Role role;
  std::string gguf;  // blk.L.<gguf>.weight (.bias); experts: the stacked <gguf> of all of them
  std::string hf;    // HF name under model.layers.L.; experts: under the expert's prefix
  int64_t in = 0;    // a matrix: `out` rows of `in`; a vector (in 0): `out` elements
  int64_t out = 0;
  bool bias = false;
  // A mixture's expert matrices: one per expert, HF's under
  // model.layers.L.<hf_experts>E., GGUF's stacked or blk.L.<gguf_expert>.E.
  int32_t n_experts = 0;
  std::string hf_experts, gguf_expert;
  // HF import: rows of this many heads go from rotate-half pairs to GGUF's
  // interleaved ones (0: as stored); what is added to every element (1 for
  // norms stored as w where GGUF stores 1 + w).
  int32_t permute_heads = 0;
  float hf_add = 0.0f;
  // Bound only where the file has it (Qwen2-MoE's shared expert gate).
  bool optional = false;
  // Adds into the residual stream: synth draws it smaller so the stream
  // stays O(1) over the depth.
  bool residual = false;

  bool is_vector() const { return in == 0; }
};

// A layer's RMSNorms: before attention and the FFN (Llama), before and
// after both (Gemma 2/3), or after both only (OLMo 2).
enum class NormPlacement : uint8_t { kPre, kPreAndPost, kPostOnly };
// q and k RMSNorms before RoPE: none, over each head (Qwen3, Gemma 3), or
// over all heads of a row at once (OLMoE, OLMo 2).
enum class QkNorm : uint8_t { kNone, kPerHead, kAcrossHeads };
// Attention biases on q, k and v: never, where the checkpoint has them, always (Qwen2).
enum class AttnBias : uint8_t { kNever, kIfPresent, kAlways };
// A mixture of experts: where expert_count says (Mixtral is llama with
// experts), always (some layers may stay dense), or in every layer.
enum class Experts : uint8_t { kOptional, kRequired, kEveryLayer };

struct ArchTraits {
  RopeLayout rope_layout = RopeLayout::kNeox;
  NormPlacement norms = NormPlacement::kPre;
  QkNorm qk_norm = QkNorm::kNone;
  AttnBias attn_bias = AttnBias::kNever;
  Experts experts = Experts::kOptional;
  bool expert_weights_norm = true;  // the chosen experts' weights renormalised, where the file does not say
  FfnActivation ffn_act = FfnActivation::kSilu;
  bool fused_projections = false;   // q/k/v in one matrix and gate/up in another (Phi-3)
  bool latent_attention = false;    // multi-head latent attention (DeepSeek-V2)
  // YaRN's attention factor multiplies the attention scale (DeepSeek-V2)
  // rather than the rotated dims of q and k.
  bool yarn_scales_attention = false;
  // Hugging Face: norm weights are stored as w where GGUF has 1 + w
  // (Gemma); q and k rows permuted from rotate-half pairs; the class's
  // rms_norm_eps and tie_word_embeddings defaults.
  bool hf_norm_plus_one = false;
  bool hf_permute_qk = false;
  float hf_rms_eps = 1e-6f;
  bool hf_tied = false;
};

// A transformers class this architecture reads, and what its config.json
// holds beyond the common keys (may be null).
using HfReader = Status (*)(const nlohmann::json& j, const std::string& src, HfConfig& c);
struct HfClass {
  const char* name;
  HfReader read;
};

struct ArchRecord {
  Arch arch;
  const char* gguf_name;
  std::vector<HfClass> hf_classes;
  ArchTraits traits;
  // The architecture's own GGUF keys, read after the common ones, and
  // written after them (each may be null).
  Status (*read_gguf)(const GgufFile& f, ModelConfig& c) = nullptr;
  void (*write_gguf)(GgufWriter& w, const ModelConfig& c) = nullptr;
  // Shapes `duet synth` cannot draw for this family (null: any).
  Status (*check_shape)(const ModelConfig& c) = nullptr;
  // Layer `layer`'s tensors, in the order files hold them.
  std::vector<LayerTensor> (*layer_tensors)(const ModelConfig& c, int layer) = nullptr;
};

const ArchRecord& arch_record(Arch a);
const ArchTraits& arch_traits(Arch a);
// By general.architecture, or by a Hugging Face class; nullptr when duet
// has no such architecture.
const ArchRecord* find_arch(std::string_view gguf_name);
const ArchRecord* find_hf_class(std::string_view hf_class, const HfClass** which = nullptr);
// "llama, mistral, ..." and "LlamaForCausalLM, ...", for error messages.
std::string supported_architectures();
std::string supported_hf_classes();

}  // namespace duet
