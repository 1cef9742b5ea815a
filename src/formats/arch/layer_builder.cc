#include "formats/arch/layer_builder.h"

#include "formats/llama_names.h"

namespace duet {

namespace n = gguf_names;

LayerBuilder::LayerBuilder(const ModelConfig& c, int layer) : c_(c), layer_(layer) {}

LayerBuilder& LayerBuilder::norm(Role role, const std::string& gguf, const std::string& hf, int64_t size) {
  LayerTensor t{role, gguf, hf};
  t.out = size;
  t.hf_add = arch_traits(c_.arch).hf_norm_plus_one ? 1.0f : 0.0f;
  tensors_.push_back(std::move(t));
  return *this;
}

LayerBuilder& LayerBuilder::matrix(Role role, const std::string& gguf, const std::string& hf, int64_t in,
                                   int64_t out) {
  LayerTensor t{role, gguf, hf};
  t.in = in;
  t.out = out;
  tensors_.push_back(std::move(t));
  return *this;
}

LayerBuilder& LayerBuilder::bias(Role role, const std::string& gguf, const std::string& hf, int64_t size) {
  LayerTensor t{role, gguf, hf};
  t.out = size;
  t.bias = true;
  tensors_.push_back(std::move(t));
  return *this;
}

LayerBuilder& LayerBuilder::experts(Role role, const std::string& gguf_stacked, const std::string& gguf_expert,
                                    const std::string& hf_prefix, const std::string& hf, int64_t in, int64_t out) {
  matrix(role, gguf_stacked, hf, in, out);
  LayerTensor& t = tensors_.back();
  t.n_experts = c_.n_experts;
  t.hf_experts = hf_prefix;
  t.gguf_expert = gguf_expert;
  return *this;
}

LayerBuilder& LayerBuilder::permuted(int32_t heads) {
  if (arch_traits(c_.arch).hf_permute_qk) tensors_.back().permute_heads = heads;
  return *this;
}

LayerBuilder& LayerBuilder::residual() {
  tensors_.back().residual = true;
  return *this;
}

LayerBuilder& LayerBuilder::optional() {
  tensors_.back().optional = true;
  return *this;
}

void add_attention(LayerBuilder& b) {
  const ModelConfig& c = b.config();
  const ArchTraits& t = arch_traits(c.arch);
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  if (t.fused_projections) {
    b.matrix(Role::kQkv, n::kAttnQkv, "self_attn.qkv_proj.weight", c.dim, q + 2 * kv);
  } else {
    b.matrix(Role::kQ, n::kAttnQ, "self_attn.q_proj.weight", c.dim, q).permuted(c.n_heads);
    b.matrix(Role::kK, n::kAttnK, "self_attn.k_proj.weight", c.dim, kv).permuted(c.n_kv_heads);
    b.matrix(Role::kV, n::kAttnV, "self_attn.v_proj.weight", c.dim, kv);
  }
  if (c.qkv_bias) {
    b.bias(Role::kQBias, n::kAttnQ, "self_attn.q_proj.bias", q).permuted(c.n_heads);
    b.bias(Role::kKBias, n::kAttnK, "self_attn.k_proj.bias", kv).permuted(c.n_kv_heads);
    b.bias(Role::kVBias, n::kAttnV, "self_attn.v_proj.bias", kv);
  }
  if (t.qk_norm != QkNorm::kNone) {
    const bool across = t.qk_norm == QkNorm::kAcrossHeads;
    b.norm(Role::kQNorm, n::kAttnQNorm, "self_attn.q_norm.weight", across ? q : c.head_dim);
    b.norm(Role::kKNorm, n::kAttnKNorm, "self_attn.k_norm.weight", across ? kv : c.head_dim);
  }
  b.matrix(Role::kOut, n::kAttnOut, "self_attn.o_proj.weight", q, c.dim).residual();
}

namespace {

void add_experts(LayerBuilder& b, const HfExpertNames& hf) {
  const ModelConfig& c = b.config();
  const int64_t ffn = c.expert_ffn_dim;
  b.matrix(Role::kRouter, n::kFfnRouter, hf.router, c.dim, c.n_experts);
  b.experts(Role::kExpGate, n::kFfnGateExps, n::kFfnGate, hf.experts, hf.gate, c.dim, ffn);
  b.experts(Role::kExpUp, n::kFfnUpExps, n::kFfnUp, hf.experts, hf.up, c.dim, ffn);
  b.experts(Role::kExpDown, n::kFfnDownExps, n::kFfnDown, hf.experts, hf.down, ffn, c.dim).residual();
  const int64_t shared = c.shared_expert_ffn_dim;
  if (shared == 0) return;
  b.matrix(Role::kSharedGate, n::kFfnGateShexp, hf.shared + "gate_proj.weight", c.dim, shared);
  b.matrix(Role::kSharedUp, n::kFfnUpShexp, hf.shared + "up_proj.weight", c.dim, shared);
  b.matrix(Role::kSharedDown, n::kFfnDownShexp, hf.shared + "down_proj.weight", shared, c.dim).residual();
  if (!hf.shared_router.empty()) b.matrix(Role::kSharedRouter, n::kFfnRouterShexp, hf.shared_router, c.dim, 1).optional();
}

}  // namespace

void add_ffn(LayerBuilder& b, const HfExpertNames& names) {
  const ModelConfig& c = b.config();
  if (c.moe_layer(b.layer())) return add_experts(b, names);
  if (arch_traits(c.arch).fused_projections) {
    b.matrix(Role::kGateUp, n::kFfnUp, "mlp.gate_up_proj.weight", c.dim, 2 * int64_t{c.ffn_dim});
  } else {
    b.matrix(Role::kGate, n::kFfnGate, "mlp.gate_proj.weight", c.dim, c.ffn_dim);
    b.matrix(Role::kUp, n::kFfnUp, "mlp.up_proj.weight", c.dim, c.ffn_dim);
  }
  b.matrix(Role::kDown, n::kFfnDown, "mlp.down_proj.weight", c.ffn_dim, c.dim).residual();
}

// Norm names: HF calls the norm after attention "post_attention_layernorm"
// whether it feeds the FFN (Llama: GGUF's ffn_norm) or follows attention's
// output (Gemma, OLMo 2: post_attention_norm).
std::vector<LayerTensor> standard_layer(const ModelConfig& c, int layer, const HfExpertNames& names) {
  LayerBuilder b(c, layer);
  const NormPlacement p = arch_traits(c.arch).norms;
  if (p != NormPlacement::kPostOnly) b.norm(Role::kAttnNorm, n::kAttnNorm, "input_layernorm.weight", c.dim);
  add_attention(b);
  switch (p) {
    case NormPlacement::kPre:
      b.norm(Role::kFfnNorm, n::kFfnNorm, "post_attention_layernorm.weight", c.dim);
      break;
    case NormPlacement::kPreAndPost:
      b.norm(Role::kPostAttnNorm, n::kPostAttnNorm, "post_attention_layernorm.weight", c.dim);
      b.norm(Role::kFfnNorm, n::kFfnNorm, "pre_feedforward_layernorm.weight", c.dim);
      b.norm(Role::kPostFfnNorm, n::kPostFfnNorm, "post_feedforward_layernorm.weight", c.dim);
      break;
    case NormPlacement::kPostOnly:
      b.norm(Role::kPostAttnNorm, n::kPostAttnNorm, "post_attention_layernorm.weight", c.dim);
      b.norm(Role::kPostFfnNorm, n::kPostFfnNorm, "post_feedforward_layernorm.weight", c.dim);
      break;
  }
  add_ffn(b, names);
  return b.take();
}

}  // namespace duet
