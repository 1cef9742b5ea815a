// DeepSeek-V2 (and V2-Lite): multi-head latent attention, whose KV cache
// holds one latent row per token (the decoder attends over it), and a
// mixture of experts with shared experts after the first
// leading_dense_block_count layers, which stay dense. RoPE over adjacent
// pairs, as its Hugging Face code de-interleaves them before rotate-half,
// so no row is permuted on import; YaRN's factor scales attention itself.
#include "formats/arch/arch.h"
#include "formats/arch/layer_builder.h"
#include "formats/gguf.h"
#include "formats/gguf_keys_read.h"
#include "formats/hf_config.h"
#include "formats/hf_json.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

namespace n = gguf_names;

// Multi-head latent attention: key_length is nope + rope (RoPE dims last),
// value_length the value width, kv_lora_rank the cached latent's width.
Status read_mla_gguf(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
  DUET_ASSIGN(c.kv_lora_rank, gguf_read::dim(f, key(n::kKvLoraRank), gguf_read::kMaxDim));
  DUET_ASSIGN(const uint64_t q_lora, f.get_uint_or(key(n::kQLoraRank), 0));
  if (q_lora > gguf_read::kMaxDim) return err(f.path(), ": ", key(n::kQLoraRank), " ", q_lora, " is out of range");
  c.q_lora_rank = static_cast<int32_t>(q_lora);
  if (!f.has(key(n::kKeyLength)) || !f.has(key(n::kRopeDimCount)))
    return err(f.path(), ": ", c.arch_name(), " needs ", key(n::kKeyLength), " and ", key(n::kRopeDimCount));
  if (c.rope_dim >= c.head_dim)
    return err(f.path(), ": ", key(n::kRopeDimCount), " ", c.rope_dim, " leaves no unrotated dims of the ",
               key(n::kKeyLength), " ", c.head_dim);
  DUET_ASSIGN(c.v_head_dim, gguf_read::dim(f, key(n::kValueLength), gguf_read::kMaxDim));
  c.n_kv_heads = c.n_heads;  // each head decompresses its own K and V from the one latent
  return {};
}

// Shared experts (expert_shared_count of them, run as one FFN of their
// summed width), the routed sum's scale, the leading dense layers.
Status read_deepseek_experts_gguf(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
  DUET_ASSIGN(const uint64_t shared, f.get_uint_or(key(n::kExpertSharedCount), 0));
  if (shared > 64) return err(f.path(), ": ", key(n::kExpertSharedCount), " ", shared, " is out of range (0..64)");
  c.shared_expert_ffn_dim = static_cast<int32_t>(shared) * c.expert_ffn_dim;
  DUET_ASSIGN(c.expert_weights_scale, gguf_read::positive_float_or(f, key(n::kExpertWeightsScale), 1.0));
  if (!(c.expert_weights_scale > 0.0f)) return err(f.path(), ": ", key(n::kExpertWeightsScale), " must be positive");
  DUET_ASSIGN(const uint64_t gating, f.get_uint_or(key(n::kExpertGatingFunc), 1));
  if (gating != 1)
    return err(f.path(), ": ", key(n::kExpertGatingFunc), " ", gating,
               " is not supported (1, softmax; DeepSeek-V3's sigmoid scoring is not)");
  DUET_ASSIGN(const uint64_t dense, f.get_uint_or(key(n::kLeadingDenseBlockCount), 0));
  if (dense > static_cast<uint64_t>(c.n_layers))
    return err(f.path(), ": ", key(n::kLeadingDenseBlockCount), " ", dense, " is more than the ", c.n_layers, " layers");
  c.n_dense_leading = static_cast<int32_t>(dense);
  for (int32_t l = 0; l < c.n_dense_leading; ++l)
    if (f.tensor(n::blk(l, n::kFfnRouter)))
      return err(f.path(), ": layer ", l, " has a router (", n::blk(l, n::kFfnRouter), ") but is one of the ",
                 c.n_dense_leading, " leading dense layers");
  return {};
}

Status read_deepseek2_gguf(const GgufFile& f, ModelConfig& c) {
  DUET_TRY(read_mla_gguf(f, c));
  return c.moe() ? read_deepseek_experts_gguf(f, c) : Status{};
}

void write_deepseek2_gguf(GgufWriter& w, const ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
  const auto u32 = [](int32_t v) { return GgufValue::of_u32(static_cast<uint32_t>(v)); };
  w.set(key(n::kKvLoraRank), u32(c.kv_lora_rank));
  if (c.q_lora_rank > 0) w.set(key(n::kQLoraRank), u32(c.q_lora_rank));
  if (!c.moe()) return;
  w.set(key(n::kExpertSharedCount), u32(c.shared_expert_ffn_dim / c.expert_ffn_dim));
  w.set(key(n::kExpertWeightsScale), GgufValue::of_f32(c.expert_weights_scale));
  w.set(key(n::kLeadingDenseBlockCount), u32(c.n_dense_leading));
  w.set(key(n::kExpertGatingFunc), u32(1));
}

using namespace hf_json;

// The mixture: greedy top-k of a softmax, n_shared_experts fused as one MLP,
// the first first_k_dense_replace layers dense. Its modeling code
// multiplies the routing weights by routed_scaling_factor only when it does
// not renormalise them, so the scale is 1 under norm_topk_prob.
Status read_deepseek_experts_hf(const json& j, const std::string& src, ModelConfig& m) {
  DUET_TRY(read_expert_counts(j, "n_routed_experts", src, &m.n_experts, &m.n_experts_used, /*required=*/true));
  m.expert_ffn_dim = 1407;
  DUET_TRY(read_int(j, "moe_intermediate_size", src, 1, 8 * kMaxDim, &m.expert_ffn_dim));
  int32_t shared = 0, freq = 1;
  DUET_TRY(read_int(j, "n_shared_experts", src, 0, 64, &shared));
  m.shared_expert_ffn_dim = shared * m.expert_ffn_dim;
  m.expert_weights_norm = false;
  DUET_TRY(read_bool(j, "norm_topk_prob", src, &m.expert_weights_norm));
  double scale = 1.0;
  DUET_TRY(read_float(j, "routed_scaling_factor", src, &scale));
  if (!(scale > 0.0)) return err(src, ": routed_scaling_factor ", scale, " must be positive");
  m.expert_weights_scale = m.expert_weights_norm && m.n_experts_used > 1 ? 1.0f : static_cast<float>(scale);
  if (const json* f = field(j, "scoring_func"); f && *f != "softmax")
    return err(src, ": scoring_func ", f->dump(), " is not supported (softmax)");
  int32_t groups = 1, top_groups = 1;
  DUET_TRY(read_int(j, "n_group", src, 1, 4096, &groups));
  DUET_TRY(read_int(j, "topk_group", src, 1, 4096, &top_groups));
  if (const json* t = field(j, "topk_method"); t && *t != "greedy" && top_groups < groups)
    return err(src, ": topk_method ", t->dump(), " over ", top_groups, " of ", groups,
               " expert groups is not supported (greedy)");
  DUET_TRY(read_int(j, "moe_layer_freq", src, 1, 4096, &freq));
  if (freq != 1) return err(src, ": moe_layer_freq ", freq, " is not supported (1)");
  return read_int(j, "first_k_dense_replace", src, 0, m.n_layers, &m.n_dense_leading);
}

// Latent attention's ranks and head widths (transformers' defaults: kv_lora
// 512, q direct, nope 128 + rope 64, values 128), then the mixture.
Status read_deepseek2_hf(const json& j, const std::string& src, HfConfig& c) {
  ModelConfig& m = c.model;
  int32_t nope = 128, rope = 64;
  m.kv_lora_rank = 512;
  m.v_head_dim = 128;
  DUET_TRY(read_int(j, "kv_lora_rank", src, 1, kMaxDim, &m.kv_lora_rank));
  DUET_TRY(read_int(j, "q_lora_rank", src, 1, kMaxDim, &m.q_lora_rank));  // null: q projected directly
  DUET_TRY(read_int(j, "qk_nope_head_dim", src, 1, kMaxDim, &nope));
  DUET_TRY(read_int(j, "qk_rope_head_dim", src, 2, kMaxDim, &rope));
  DUET_TRY(read_int(j, "v_head_dim", src, 1, kMaxDim, &m.v_head_dim));
  if (rope % 2 != 0) return err(src, ": qk_rope_head_dim ", rope, " must be even for RoPE");
  m.head_dim = nope + rope;
  m.rope_dim = rope;
  m.n_kv_heads = m.n_heads;
  if (!field(j, "n_routed_experts")) return {};
  return read_deepseek_experts_hf(j, src, m);
}

Status check_deepseek2_shape(const ModelConfig& s) {
  auto in = [](const char* what, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v < lo || v > hi) return err("synth: ", what, " = ", v, " is outside [", lo, ", ", hi, "]");
    return {};
  };
  const int64_t hd = s.head_dim ? s.head_dim : s.dim / s.n_heads;
  DUET_TRY(in("kv-lora-rank", s.kv_lora_rank, 1, 1 << 17));
  DUET_TRY(in("q-lora-rank", s.q_lora_rank, 0, 1 << 17));
  DUET_TRY(in("v-head-dim", s.v_head_dim, 1, 4096));
  DUET_TRY(in("rope-dim", s.rope_dim, 2, hd - 1));
  if (s.rope_dim % 2 != 0) return err("synth: rope-dim (", s.rope_dim, ") must be even");
  DUET_TRY(in("dense-layers", s.n_dense_leading, 0, s.n_layers));
  if (s.moe() && s.expert_ffn_dim > 0 && s.shared_expert_ffn_dim % s.expert_ffn_dim != 0)
    return err("synth: deepseek2's shared experts are whole experts of expert-ffn ", s.expert_ffn_dim);
  return {};
}

// q directly or through its low-rank bottleneck; the latent with the
// shared rotated key, its norm, its per-head decompression into [nope key
// | value]; the output from the heads' values.
void add_latent_attention(LayerBuilder& b) {
  const ModelConfig& c = b.config();
  const int64_t heads = c.n_heads, q = heads * c.head_dim;
  if (c.q_lora_rank > 0) {
    b.matrix(Role::kQA, n::kAttnQA, "self_attn.q_a_proj.weight", c.dim, c.q_lora_rank);
    b.norm(Role::kQANorm, n::kAttnQANorm, "self_attn.q_a_layernorm.weight", c.q_lora_rank);
    b.matrix(Role::kQ, n::kAttnQB, "self_attn.q_b_proj.weight", c.q_lora_rank, q);
  } else {
    b.matrix(Role::kQ, n::kAttnQ, "self_attn.q_proj.weight", c.dim, q);
  }
  b.matrix(Role::kKvA, n::kAttnKvA, "self_attn.kv_a_proj_with_mqa.weight", c.dim, c.latent_dim());
  b.norm(Role::kKvANorm, n::kAttnKvANorm, "self_attn.kv_a_layernorm.weight", c.kv_lora_rank);
  b.matrix(Role::kKvB, n::kAttnKvB, "self_attn.kv_b_proj.weight", c.kv_lora_rank,
           heads * (c.nope_dim() + c.v_head_dim));
  b.matrix(Role::kOut, n::kAttnOut, "self_attn.o_proj.weight", heads * c.v_head_dim, c.dim).residual();
}

// Its shared experts are one ungated MLP of their summed width.
std::vector<LayerTensor> deepseek2_layer(const ModelConfig& c, int layer) {
  LayerBuilder b(c, layer);
  b.norm(Role::kAttnNorm, n::kAttnNorm, "input_layernorm.weight", c.dim);
  add_latent_attention(b);
  b.norm(Role::kFfnNorm, n::kFfnNorm, "post_attention_layernorm.weight", c.dim);
  HfExpertNames names;
  names.shared = "mlp.shared_experts.";
  add_ffn(b, names);
  return b.take();
}

}  // namespace

ArchRecord deepseek2_record() {
  ArchTraits t;
  t.rope_layout = RopeLayout::kNormal;
  t.latent_attention = true;
  t.yarn_scales_attention = true;
  t.expert_weights_norm = false;
  return {.arch = Arch::kDeepseek2,
          .gguf_name = "deepseek2",
          .hf_classes = {{"DeepseekV2ForCausalLM", read_deepseek2_hf}},
          .traits = t,
          .read_gguf = read_deepseek2_gguf,
          .write_gguf = write_deepseek2_gguf,
          .check_shape = check_deepseek2_shape,
          .layer_tensors = deepseek2_layer};
}

}  // namespace duet
