// Hyper-parameters of a decoder-only transformer: the one struct that every
// source fills (GGUF metadata, a Hugging Face config.json, a llama2.c header,
// a synthetic shape) and the one writer of them as GGUF metadata. The
// architectures differ in these values and in which tensors they have
// (formats/arch/ holds each one's record); the layer code is shared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/arch/arch_id.h"

namespace duet {

class GgufFile;
class GgufWriter;

// How RoPE pairs the dims of a head: llama's GGUF layout rotates adjacent
// pairs (2i, 2i+1); NeoX/Qwen2 rotate (i, i + rope_dim/2).
enum class RopeLayout { kNormal, kNeox };

// The gated feed-forward's activation: SwiGLU (silu) or GeGLU with the tanh
// approximation of GELU (Gemma).
enum class FfnActivation { kSilu, kGeluTanh };

// How a sequence's final hidden states become one embedding vector
// (`<arch>.pooling_type`, numbered as llama.cpp numbers it): none keeps one
// vector per token, mean averages them, cls takes the first token's, last
// the last token's; rank (a reranker's score head) duet does not compute.
enum class Pooling { kNone = 0, kMean = 1, kCls = 2, kLast = 3, kRank = 4 };
const char* pooling_name(Pooling p);

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string name = "";  // general.name
  int32_t n_vocab = 0;
  int32_t dim = 0;         // embedding length
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t ctx_len = 0;     // trained context length
  int32_t rope_dim = 0;    // leading dims of each head that RoPE rotates
  float rope_base = 10000.0f;
  RopeLayout rope_layout = RopeLayout::kNormal;
  float rope_linear_factor = 1.0f;  // positions are divided by this (linear scaling)
  // LongRoPE: the context its short factors serve, and the factor both q
  // and k's rotated dims are multiplied by.
  int32_t rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;
  // YaRN: each frequency blends its original (extrapolated) value and that
  // value over the factor (interpolated), by a ramp over the dims set by
  // the trained context and the beta bounds (rotations). Off at factor 0.
  // DeepSeek-V2 scales attention by (1 + log_mul * ln factor)^2 instead
  // of its rotated dims (rope_attn_factor); other models the reverse.
  struct Yarn {
    float factor = 0.0f;
    int32_t orig_ctx = 0;
    float beta_fast = 32.0f, beta_slow = 1.0f;
    float log_mul = 0.0f;
  };
  Yarn yarn = {};
  float rms_eps = 1e-5f;
  int32_t sliding_window = 0;       // > 0: each token attends to the last this many
  // > 0 with a sliding window: layer l attends globally iff (l + 1) % period
  // == 0 (Gemma 2: 2, Gemma 3: 6); 0: every layer slides.
  int32_t swa_period = 0;
  // > 0: RoPE base of the sliding layers, which take no linear scaling
  // (Gemma 3); the global layers use rope_base and rope_linear_factor.
  float rope_base_local = 0.0f;
  bool tied_output = false;         // the head reads token_embd (no output.weight)
  bool qkv_bias = false;            // q, k and v have biases (Qwen2; Llama where the checkpoint has them)
  float embed_scale = 1.0f;         // embeddings are multiplied by this (Gemma: sqrt(dim))
  FfnActivation ffn_act = FfnActivation::kSilu;
  float attn_softcap = 0.0f;        // > 0: scores become cap * tanh(score / cap) (Gemma 2)
  float final_softcap = 0.0f;       // the same on the logits
  float query_scale = 0.0f;         // attention scale; 0: 1/sqrt(head_dim)
  Pooling pooling = Pooling::kMean;  // for embeddings; mean where the file names none
  // Mixture of experts (n_experts 0: every FFN is dense): the experts of a
  // MoE layer, how many each token uses, each expert's FFN width, and
  // whether the chosen experts' softmax weights are renormalised to sum to
  // 1 (Mixtral, Qwen3-MoE's norm_topk_prob). Layers without a router stay dense.
  int32_t n_experts = 0;
  int32_t n_experts_used = 0;
  int32_t expert_ffn_dim = 0;
  bool expert_weights_norm = true;
  int32_t shared_expert_ffn_dim = 0;  // > 0: a shared expert every token runs too (Qwen2-MoE)
  // DeepSeek-V2: the first this many layers keep a dense FFN; the routed
  // experts' weighted sum is multiplied by expert_weights_scale.
  int32_t n_dense_leading = 0;
  float expert_weights_scale = 1.0f;
  // Of a mixture of experts, further layers whose FFN is dense (Qwen-MoE's
  // mlp_only_layers and decoder_sparse_step; in GGUF, the layers without a router).
  std::vector<int32_t> dense_layers;
  // Multi-head latent attention (DeepSeek-V2; kv_lora_rank 0: ordinary
  // attention). Each head's query and key are [nope | rope] of head_dim =
  // nope + rope_dim dims (the RoPE dims last), its value v_head_dim wide;
  // keys and values are decompressed from one latent per token, RMSNorm'd
  // c_kv [kv_lora_rank] beside the shared rotated key k_pe [rope_dim], which
  // is all the KV cache holds. q_lora_rank > 0: q too goes through a
  // low-rank bottleneck (attn_q_a, its norm, attn_q_b).
  int32_t kv_lora_rank = 0;
  int32_t q_lora_rank = 0;
  int32_t v_head_dim = 0;

  const char* arch_name() const { return duet::arch_name(arch); }
  bool moe() const { return n_experts > 0; }
  bool moe_layer(int32_t layer) const;
  bool mla() const { return kv_lora_rank > 0; }
  int32_t nope_dim() const { return head_dim - rope_dim; }  // MLA: the dims of a head RoPE leaves alone
  int32_t latent_dim() const { return kv_lora_rank + rope_dim; }  // MLA: one token's cached row per layer
  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  // q and k norms over all heads of a row at once (one weight of q_dim /
  // kv_dim: OLMo), not over each head alone (Qwen3, Gemma 3).
  bool qk_norm_spans_heads() const;
  bool layer_slides(int32_t layer) const {
    return sliding_window > 0 && (swa_period == 0 || (layer + 1) % swa_period != 0);
  }
  float attn_scale() const;
};

// Reads and validates the config of a supported architecture: the keys
// every architecture has, then its record's own (formats/arch/).
Result<ModelConfig> read_model_config(const GgufFile& file);

// Writes general.architecture, general.name and the architecture's keys as
// llama.cpp's converters do; key_length/value_length only where heads do
// not divide dim evenly, the optional features only when in use.
void write_model_config(GgufWriter& w, const ModelConfig& c);

}  // namespace duet
