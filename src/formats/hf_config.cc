#include "formats/hf_config.h"
#include "core/json_parse.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace duet {
namespace {

using nlohmann::json;

// Far above any real model; keeps products of dimensions inside int64.
constexpr int64_t kMaxDim = 1 << 20;

// A key that is absent or null reads as its default.
const json* field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Status read_int(const json& j, const char* key, const std::string& src, int64_t lo, int64_t hi,
                int32_t* out, bool required) {
  const json* v = field(j, key);
  if (!v) {
    if (required) return err(src, ": missing \"", key, "\"");
    return {};
  }
  if (!v->is_number_integer()) return err(src, ": \"", key, "\" must be an integer, not ", v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) return err(src, ": \"", key, "\" = ", x, " is out of range (", lo, "..", hi, ")");
  *out = static_cast<int32_t>(x);
  return {};
}

template <class Float>
Status read_float(const json& j, const char* key, const std::string& src, Float* out) {
  const json* v = field(j, key);
  if (!v) return {};
  if (!v->is_number()) return err(src, ": \"", key, "\" must be a number, not ", v->dump());
  const double x = v->get<double>();
  if (!std::isfinite(x)) return err(src, ": \"", key, "\" is not finite");
  *out = static_cast<Float>(x);
  return {};
}

Status read_bool(const json& j, const char* key, const std::string& src, bool* out) {
  const json* v = field(j, key);
  if (!v) return {};
  if (!v->is_boolean()) return err(src, ": \"", key, "\" must be true or false, not ", v->dump());
  *out = v->get<bool>();
  return {};
}

// bos/eos ids: an integer, or (eos in Llama 3.1 configs) a list whose first
// entry is the primary one.
Status read_token_id(const json& j, const char* key, const std::string& src, int64_t* out) {
  const json* v = field(j, key);
  if (v && v->is_array() && !v->empty()) v = &(*v)[0];
  if (!v) return {};
  if (!v->is_number_integer() || v->get<int64_t>() < 0)
    return err(src, ": \"", key, "\" must be a token id, not ", v->dump());
  *out = v->get<int64_t>();
  return {};
}

Status read_factors(const json& j, const char* key, const std::string& src, std::vector<float>* out) {
  const json* v = field(j, key);
  if (!v || !v->is_array() || v->empty()) return err(src, ": longrope rope_scaling needs a \"", key, "\" list");
  for (const json& x : *v) {
    if (!x.is_number() || !(x.get<double>() > 0.0)) return err(src, ": ", key, " must hold positive numbers");
    out->push_back(x.get<float>());
  }
  return {};
}

// Phi-3's LongRoPE: two tables of per-dimension divisors; the attention
// factor (read later, with the context lengths) may be given here.
Status read_longrope(const json& v, const std::string& src, HfRopeScaling* rs) {
  DUET_TRY(read_factors(v, "short_factor", src, &rs->short_factor));
  DUET_TRY(read_factors(v, "long_factor", src, &rs->long_factor));
  if (rs->short_factor.size() != rs->long_factor.size())
    return err(src, ": longrope short_factor and long_factor differ in length");
  DUET_TRY(read_float(v, "attention_factor", src, &rs->factor));
  if (!field(v, "attention_factor")) rs->factor = 0.0;  // derived from the context lengths
  DUET_TRY(read_int(v, "original_max_position_embeddings", src, 1, 1 << 24, &rs->original_max_position_embeddings, false));
  return {};
}

Status read_rope_scaling(const json& j, const std::string& src, HfRopeScaling* rs) {
  const json* v = field(j, "rope_scaling");
  if (!v) return {};
  if (!v->is_object()) return err(src, ": \"rope_scaling\" must be an object");
  const json* type = field(*v, "rope_type");
  if (!type) type = field(*v, "type");
  if (!type || !type->is_string()) return err(src, ": rope_scaling has no \"rope_type\" string");
  const std::string t = type->get<std::string>();
  if (t == "default") return {};
  if (t != "linear" && t != "llama3" && t != "longrope" && t != "yarn")
    return err(src, ": rope_scaling type '", t, "' is not supported (supported: linear, llama3, longrope, yarn)");
  rs->type = t;
  if (t == "longrope") return read_longrope(*v, src, rs);
  DUET_TRY(read_float(*v, "factor", src, &rs->factor));
  if (!field(*v, "factor")) return err(src, ": rope_scaling of type ", t, " needs \"factor\"");
  if (!(rs->factor >= 1.0 && rs->factor <= 1024.0))
    return err(src, ": rope_scaling factor ", rs->factor, " is out of range (1..1024)");
  if (t == "llama3") {
    DUET_TRY(read_float(*v, "low_freq_factor", src, &rs->low_freq_factor));
    DUET_TRY(read_float(*v, "high_freq_factor", src, &rs->high_freq_factor));
    DUET_TRY(read_int(*v, "original_max_position_embeddings", src, 1, 1 << 24,
                      &rs->original_max_position_embeddings, false));
    if (!(rs->low_freq_factor > 0 && rs->high_freq_factor > rs->low_freq_factor))
      return err(src, ": rope_scaling needs 0 < low_freq_factor < high_freq_factor (got ",
                 rs->low_freq_factor, ", ", rs->high_freq_factor, ")");
  }
  if (t == "yarn") {
    if (!field(*v, "original_max_position_embeddings"))
      return err(src, ": rope_scaling of type yarn needs \"original_max_position_embeddings\"");
    DUET_TRY(read_int(*v, "original_max_position_embeddings", src, 1, 1 << 24,
                      &rs->original_max_position_embeddings, false));
    DUET_TRY(read_float(*v, "beta_fast", src, &rs->beta_fast));
    DUET_TRY(read_float(*v, "beta_slow", src, &rs->beta_slow));
    if (!(rs->beta_fast > rs->beta_slow && rs->beta_slow > 0))
      return err(src, ": rope_scaling needs beta_fast > beta_slow > 0 (got ", rs->beta_fast, ", ", rs->beta_slow, ")");
    DUET_TRY(read_float(*v, "mscale", src, &rs->mscale));
    DUET_TRY(read_float(*v, "mscale_all_dim", src, &rs->mscale_all_dim));
    if (field(*v, "attention_factor")) return err(src, ": rope_scaling attention_factor is not supported for yarn");
  }
  return {};
}

// YaRN into the model config. DeepSeek-V2 (transformers' DeepseekV2
// classes) multiplies its rotated dims by mscale(mscale) / mscale(mscale_all_dim)
// and the attention scale by mscale(mscale_all_dim)^2, where mscale(m) =
// 1 + 0.1 m ln factor: with the two equal (as the released checkpoints set
// them) only the attention multiplier remains, llama.cpp's
// yarn_log_multiplier = 0.1 mscale_all_dim. Others scale their rotated dims
// by 1 + 0.1 ln factor, which the GGUF reader derives from the factor.
Status set_yarn(const std::string& src, HfConfig& c) {
  const HfRopeScaling& rs = c.rope_scaling;
  ModelConfig& m = c.model;
  if (m.arch == "deepseek2" ? rs.mscale != rs.mscale_all_dim : (rs.mscale != 1.0 || rs.mscale_all_dim != 0.0))
    return err(src, ": rope_scaling mscale ", rs.mscale, " with mscale_all_dim ", rs.mscale_all_dim,
               " is not supported for ", m.arch, m.arch == "deepseek2" ? " (they must be equal)" : "");
  m.yarn = {static_cast<float>(rs.factor), rs.original_max_position_embeddings, static_cast<float>(rs.beta_fast),
            static_cast<float>(rs.beta_slow), static_cast<float>(m.arch == "deepseek2" ? 0.1 * rs.mscale_all_dim : 0.0)};
  if (m.arch != "deepseek2") m.rope_attn_factor = static_cast<float>(1.0 + 0.1 * std::log(rs.factor));
  return {};
}

// The transformers class of each architecture and its GGUF name.
struct HfArch {
  const char* hf;
  const char* gguf;
};
constexpr HfArch kHfArchs[] = {
    {"LlamaForCausalLM", "llama"},   {"MistralForCausalLM", "llama"}, {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3"},   {"Gemma2ForCausalLM", "gemma2"}, {"Gemma3ForCausalLM", "gemma3"},
    {"Phi3ForCausalLM", "phi3"},     {"MixtralForCausalLM", "llama"}, {"Qwen3MoeForCausalLM", "qwen3moe"},
    {"Qwen2MoeForCausalLM", "qwen2moe"}, {"DeepseekV2ForCausalLM", "deepseek2"}, {"OlmoeForCausalLM", "olmoe"},
    {"Olmo2ForCausalLM", "olmo2"},
};

std::string supported_hf_archs() {
  std::string list;
  for (const HfArch& a : kHfArchs) list += (list.empty() ? "" : ", ") + std::string(a.hf);
  return list;
}

// A soft-cap key: its class default unless given; null turns it off.
Status read_softcap(const json& j, const char* key, const std::string& src, float fallback, float* out) {
  *out = fallback;
  const auto it = j.find(key);
  if (it != j.end() && it->is_null()) *out = 0.0f;
  DUET_TRY(read_float(j, key, src, out));
  if (!(*out >= 0.0f)) return err(src, ": \"", key, "\" must not be negative");
  return {};
}

// Gemma 2/3: GeGLU, the embedding scale, soft-caps (Gemma 2), windows on
// all but every period-th layer, the query scale from query_pre_attn_scalar.
Status read_gemma(const json& j, const std::string& src, ModelConfig& m) {
  const bool gemma2 = m.arch == "gemma2";
  const json* act = field(j, "hidden_activation");
  if (!act) act = field(j, "hidden_act");
  if (act && *act != "gelu_pytorch_tanh" && *act != "gelu")
    return err(src, ": hidden_activation ", act->dump(), " is not supported (gelu_pytorch_tanh)");
  m.ffn_act = FfnActivation::kGeluTanh;
  m.embed_scale = std::sqrt(static_cast<float>(m.dim));
  m.sliding_window = 4096;
  DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &m.sliding_window, false));
  m.swa_period = gemma2 ? 2 : 6;
  if (!gemma2) {
    int32_t pattern = 6;
    DUET_TRY(read_int(j, "sliding_window_pattern", src, 1, 4096, &pattern, false));
    double local_base = 10000.0;
    DUET_TRY(read_float(j, "rope_local_base_freq", src, &local_base));
    if (pattern != 6 || local_base != 10000.0)
      return err(src, ": Gemma 3 with sliding_window_pattern ", pattern, " and rope_local_base_freq ", local_base,
                 " is not supported (6 and 10000)");
    m.rope_base_local = 10000.0f;
  }
  DUET_TRY(read_softcap(j, "attn_logit_softcapping", src, gemma2 ? 50.0f : 0.0f, &m.attn_softcap));
  DUET_TRY(read_softcap(j, "final_logit_softcapping", src, gemma2 ? 30.0f : 0.0f, &m.final_softcap));
  double scalar = 256.0;
  DUET_TRY(read_float(j, "query_pre_attn_scalar", src, &scalar));
  if (!(scalar > 0.0)) return err(src, ": query_pre_attn_scalar must be positive");
  m.query_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  return {};
}

// LongRoPE's context lengths and attention factor: sqrt(1 + ln(s) / ln(orig))
// for s = max_position_embeddings / orig, unless the config gives it.
Status set_longrope(const json& j, const std::string& src, HfConfig& c) {
  HfRopeScaling& rs = c.rope_scaling;
  DUET_TRY(read_int(j, "original_max_position_embeddings", src, 1, 1 << 24, &rs.original_max_position_embeddings, false));
  const double orig = rs.original_max_position_embeddings;
  const double s = c.model.ctx_len / orig;
  double factor = rs.factor;
  if (factor == 0.0) factor = s > 1.0 ? std::sqrt(1.0 + std::log(s) / std::log(orig)) : 1.0;
  c.model.rope_orig_ctx = rs.original_max_position_embeddings;
  c.model.rope_attn_factor = static_cast<float>(factor);
  return {};
}

// Mixtral: num_local_experts experts of intermediate_size, every layer.
// OLMoE: num_experts of intermediate_size, every layer, norm_topk_prob off
// unless given. Qwen2-MoE and Qwen3-MoE: num_experts of moe_intermediate_size (Qwen2-MoE
// with a gated shared expert of shared_expert_intermediate_size), on the layers that
// decoder_sparse_step selects and mlp_only_layers does not name (those keep
// a dense MLP of intermediate_size); norm_topk_prob as the class defaults it.
Status read_experts(const json& j, const std::string& src, bool mixtral, HfConfig& c) {
  ModelConfig& m = c.model;
  DUET_TRY(read_int(j, mixtral ? "num_local_experts" : "num_experts", src, 1, 4096, &m.n_experts, false));
  if (m.n_experts == 0) m.n_experts = mixtral ? 8 : 128;
  m.n_experts_used = mixtral ? 2 : 8;
  DUET_TRY(read_int(j, "num_experts_per_tok", src, 1, 4096, &m.n_experts_used, false));
  if (m.n_experts_used > m.n_experts)
    return err(src, ": num_experts_per_tok ", m.n_experts_used, " is more than the ", m.n_experts, " experts");
  m.expert_ffn_dim = m.ffn_dim;
  if (mixtral) return {};
  if (m.arch == "olmoe") {
    if (!field(j, "num_experts")) m.n_experts = 64;
    if (!field(j, "num_experts_per_tok")) m.n_experts_used = 8;
    if (m.n_experts_used > m.n_experts)
      return err(src, ": num_experts_per_tok ", m.n_experts_used, " is more than the ", m.n_experts, " experts");
    m.expert_weights_norm = false;
    return read_bool(j, "norm_topk_prob", src, &m.expert_weights_norm);
  }
  const bool qwen2 = m.arch == "qwen2moe";
  if (!field(j, "num_experts")) m.n_experts = qwen2 ? 60 : 128;
  if (!field(j, "num_experts_per_tok")) m.n_experts_used = qwen2 ? 4 : 8;
  if (m.n_experts_used > m.n_experts)
    return err(src, ": num_experts_per_tok ", m.n_experts_used, " is more than the ", m.n_experts, " experts");
  m.expert_ffn_dim = qwen2 ? 1408 : 768;
  DUET_TRY(read_int(j, "moe_intermediate_size", src, 1, 8 * kMaxDim, &m.expert_ffn_dim, false));
  if (qwen2) {
    m.shared_expert_ffn_dim = 5632;
    DUET_TRY(read_int(j, "shared_expert_intermediate_size", src, 1, 8 * kMaxDim, &m.shared_expert_ffn_dim, false));
  }
  m.expert_weights_norm = false;
  DUET_TRY(read_bool(j, "norm_topk_prob", src, &m.expert_weights_norm));
  int32_t step = 1;
  DUET_TRY(read_int(j, "decoder_sparse_step", src, 1, 4096, &step, false));
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
    if (dense[static_cast<size_t>(l)]) c.dense_layers.push_back(l);
  return {};
}

// DeepSeek-V2: multi-head latent attention's ranks and head widths, and its
// mixture of experts (greedy top-k of a softmax, n_shared_experts fused as
// one MLP, the first first_k_dense_replace layers dense). Its modeling code
// multiplies the routing weights by routed_scaling_factor only when it does
// not renormalise them, so the scale is 1 under norm_topk_prob.
Status read_deepseek2(const json& j, const std::string& src, HfConfig& c) {
  ModelConfig& m = c.model;
  int32_t nope = 128, rope = 64;
  m.kv_lora_rank = 512;
  m.v_head_dim = 128;
  DUET_TRY(read_int(j, "kv_lora_rank", src, 1, kMaxDim, &m.kv_lora_rank, false));
  DUET_TRY(read_int(j, "q_lora_rank", src, 1, kMaxDim, &m.q_lora_rank, false));  // null: q projected directly
  DUET_TRY(read_int(j, "qk_nope_head_dim", src, 1, kMaxDim, &nope, false));
  DUET_TRY(read_int(j, "qk_rope_head_dim", src, 2, kMaxDim, &rope, false));
  DUET_TRY(read_int(j, "v_head_dim", src, 1, kMaxDim, &m.v_head_dim, false));
  if (rope % 2 != 0) return err(src, ": qk_rope_head_dim ", rope, " must be even for RoPE");
  m.head_dim = nope + rope;
  m.rope_dim = rope;
  m.n_kv_heads = m.n_heads;
  m.rope_layout = RopeLayout::kNormal;
  if (!field(j, "n_routed_experts")) return {};
  DUET_TRY(read_int(j, "n_routed_experts", src, 1, 4096, &m.n_experts, true));
  DUET_TRY(read_int(j, "num_experts_per_tok", src, 1, 4096, &m.n_experts_used, true));
  if (m.n_experts_used > m.n_experts)
    return err(src, ": num_experts_per_tok ", m.n_experts_used, " is more than the ", m.n_experts, " experts");
  m.expert_ffn_dim = 1407;
  DUET_TRY(read_int(j, "moe_intermediate_size", src, 1, 8 * kMaxDim, &m.expert_ffn_dim, false));
  int32_t shared = 0, freq = 1;
  DUET_TRY(read_int(j, "n_shared_experts", src, 0, 64, &shared, false));
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
  DUET_TRY(read_int(j, "n_group", src, 1, 4096, &groups, false));
  DUET_TRY(read_int(j, "topk_group", src, 1, 4096, &top_groups, false));
  if (const json* t = field(j, "topk_method"); t && *t != "greedy" && top_groups < groups)
    return err(src, ": topk_method ", t->dump(), " over ", top_groups, " of ", groups,
               " expert groups is not supported (greedy)");
  DUET_TRY(read_int(j, "moe_layer_freq", src, 1, 4096, &freq, false));
  if (freq != 1) return err(src, ": moe_layer_freq ", freq, " is not supported (1)");
  DUET_TRY(read_int(j, "first_k_dense_replace", src, 0, m.n_layers, &m.n_dense_leading, false));
  for (int32_t l = 0; l < m.n_dense_leading; ++l) c.dense_layers.push_back(l);
  return {};
}

}  // namespace

Result<HfConfig> parse_hf_config(const std::string& text, const std::string& src) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return err(src, ": ", parsed.error().message);
  const json& j = *parsed;
  if (!j.is_object()) return err(src, ": not a JSON object");
  HfConfig c;
  const json* archs = field(j, "architectures");
  if (!archs || !archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string())
    return err(src, ": \"architectures\" must list one architecture");
  c.hf_architecture = (*archs)[0].get<std::string>();
  const bool qwen2 = c.hf_architecture == "Qwen2ForCausalLM" || c.hf_architecture == "Qwen2MoeForCausalLM";
  const bool mistral = c.hf_architecture == "MistralForCausalLM";
  for (const HfArch& a : kHfArchs)
    if (c.hf_architecture == a.hf) c.model.arch = a.gguf;
  const bool mixtral = c.hf_architecture == "MixtralForCausalLM";
  if (c.model.arch.empty() || (c.model.arch == "llama" && c.hf_architecture != "LlamaForCausalLM" && !mistral && !mixtral))
    return err(src, ": architecture ", c.hf_architecture, " is not supported (supported: ", supported_hf_archs(), ")");
  const bool gemma = c.model.arch == "gemma2" || c.model.arch == "gemma3";
  // The transformers classes' defaults, not GGUF's.
  c.model.rms_eps = c.model.arch == "olmoe" || c.model.arch == "olmo2" ? 1e-5f : 1e-6f;

  if (const json* act = field(j, "hidden_act"); act && *act != "silu" && !gemma)
    return err(src, ": hidden_act ", act->dump(), " is not supported (silu only)");
  DUET_TRY(read_int(j, "vocab_size", src, 1, 1 << 24, &c.model.n_vocab, true));
  DUET_TRY(read_int(j, "hidden_size", src, 1, kMaxDim, &c.model.dim, true));
  DUET_TRY(read_int(j, "intermediate_size", src, 1, 8 * kMaxDim, &c.model.ffn_dim, true));
  DUET_TRY(read_int(j, "num_hidden_layers", src, 1, 4096, &c.model.n_layers, true));
  DUET_TRY(read_int(j, "num_attention_heads", src, 1, kMaxDim, &c.model.n_heads, true));
  c.model.n_kv_heads = c.model.n_heads;
  DUET_TRY(read_int(j, "num_key_value_heads", src, 1, kMaxDim, &c.model.n_kv_heads, false));
  if (c.model.n_heads % c.model.n_kv_heads != 0)
    return err(src, ": num_attention_heads ", c.model.n_heads,
               " is not a multiple of num_key_value_heads ", c.model.n_kv_heads);
  if (!field(j, "head_dim") && c.model.dim % c.model.n_heads != 0)
    return err(src, ": hidden_size ", c.model.dim, " does not divide into ",
               c.model.n_heads, " heads and head_dim is not given");
  c.model.head_dim = gemma ? 256 : c.model.dim / c.model.n_heads;
  DUET_TRY(read_int(j, "head_dim", src, 2, kMaxDim, &c.model.head_dim, false));
  if (c.model.head_dim % 2 != 0) return err(src, ": head_dim ", c.model.head_dim, " must be even for RoPE");
  c.model.ctx_len = 2048;
  DUET_TRY(read_int(j, "max_position_embeddings", src, 1, 1 << 24, &c.model.ctx_len, false));
  DUET_TRY(read_float(j, "rope_theta", src, &c.model.rope_base));
  DUET_TRY(read_float(j, "rms_norm_eps", src, &c.model.rms_eps));
  if (!(c.model.rope_base > 1.0) || !(c.model.rms_eps > 0 && c.model.rms_eps < 1))
    return err(src, ": rope_theta ", c.model.rope_base, " or rms_norm_eps ", c.model.rms_eps,
               " out of range");
  c.model.tied_output = gemma;  // Gemma's classes tie by default, the others do not
  DUET_TRY(read_bool(j, "tie_word_embeddings", src, &c.model.tied_output));
  c.model.qkv_bias = qwen2;
  if (!qwen2) DUET_TRY(read_bool(j, "attention_bias", src, &c.model.qkv_bias));
  if (c.model.qkv_bias && c.model.arch != "llama" && !qwen2)
    return err(src, ": attention_bias is not supported for ", c.hf_architecture);
  bool mlp_bias = false;
  DUET_TRY(read_bool(j, "mlp_bias", src, &mlp_bias));
  if (mlp_bias) return err(src, ": mlp_bias is not supported");
  DUET_TRY(read_rope_scaling(j, src, &c.rope_scaling));
  if (c.rope_scaling.type == "linear") c.model.rope_linear_factor = static_cast<float>(c.rope_scaling.factor);
  c.model.rope_dim = c.model.head_dim;
  if (c.model.arch == "phi3") {
    double partial = 1.0;
    DUET_TRY(read_float(j, "partial_rotary_factor", src, &partial));
    // Checked before the product is made an int: a huge factor overflowed it.
    if (!(partial > 0.0 && partial <= 1.0))
      return err(src, ": partial_rotary_factor ", partial, " must be in (0, 1]");
    c.model.rope_dim = static_cast<int32_t>(c.model.head_dim * partial);
    if (c.model.rope_dim % 2 != 0)
      return err(src, ": partial_rotary_factor ", partial, " must give an even number of rotated dims");
    DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &c.model.sliding_window, false));
  }
  c.model.rope_layout = c.model.arch == "llama" ? RopeLayout::kNormal : RopeLayout::kNeox;
  if (gemma) DUET_TRY(read_gemma(j, src, c.model));
  if (c.model.arch == "deepseek2") DUET_TRY(read_deepseek2(j, src, c));
  if (c.rope_scaling.type == "longrope") DUET_TRY(set_longrope(j, src, c));
  if (c.rope_scaling.type == "yarn") DUET_TRY(set_yarn(src, c));
  DUET_TRY(read_token_id(j, "bos_token_id", src, &c.bos_token_id));
  DUET_TRY(read_token_id(j, "eos_token_id", src, &c.eos_token_id));
  if (const json* q = field(j, "quantization_config")) {
    DUET_ASSIGN(c.quant, parse_hf_quantization(*q, src));
  }

  if (mixtral || c.model.arch == "qwen3moe" || c.model.arch == "qwen2moe" || c.model.arch == "olmoe")
    DUET_TRY(read_experts(j, src, mixtral, c));
  if (const json* clip = field(j, "clip_qkv"); clip && !clip->is_null())
    return err(src, ": clip_qkv ", clip->dump(), " is not supported (null)");
  if (mixtral) {
    DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &c.model.sliding_window, false));
  } else if (mistral) {
    c.model.sliding_window = 4096;  // MistralConfig's default; null turns it off
    const auto it = j.find("sliding_window");
    if (it != j.end() && it->is_null()) c.model.sliding_window = 0;
    DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &c.model.sliding_window, false));
  } else if (qwen2 || c.model.arch == "qwen3" || c.model.arch == "qwen3moe") {  // qwen2: Qwen2 and Qwen2-MoE
    // Qwen2 slides only from layer max_window_layers on; duet's window is
    // model-wide, so a window over some layers but not others is refused.
    bool use = false;
    DUET_TRY(read_bool(j, "use_sliding_window", src, &use));
    if (use) {
      int32_t window = 4096, from_layer = 28;
      DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &window, false));
      DUET_TRY(read_int(j, "max_window_layers", src, 0, 4096, &from_layer, false));
      if (from_layer == 0)
        c.model.sliding_window = window;
      else if (from_layer < c.model.n_layers)
        return err(src, ": a sliding window over layers ", from_layer, "..",
                   c.model.n_layers - 1, " only (max_window_layers) is not supported");
    }
  }
  return c;
}

Result<HfConfig> read_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hf_config(ss.str(), path);
}

std::vector<float> llama3_rope_divisors(const HfConfig& c) {
  const HfRopeScaling& s = c.rope_scaling;
  const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_ctx / s.low_freq_factor;
  const double high_freq_wavelen = old_ctx / s.high_freq_factor;
  const int64_t half = c.model.head_dim / 2;
  std::vector<float> div(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(c.model.rope_base, -2.0 * static_cast<double>(i) / c.model.head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    double d = 1.0;
    if (wavelen > low_freq_wavelen) {
      d = s.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (old_ctx / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      d = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    div[static_cast<size_t>(i)] = static_cast<float>(d);
  }
  return div;
}

}  // namespace duet
