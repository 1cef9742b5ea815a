#include "formats/model_config.h"

#include <cmath>

#include "formats/gguf.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

namespace n = gguf_names;

// Far above any real model, low enough that products of these fit in int64.
constexpr uint64_t kMaxDim = 1u << 20;
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxExperts = 4096;

Result<int32_t> get_dim(const GgufFile& f, const std::string& key, uint64_t max) {
  DUET_ASSIGN(uint64_t v, f.get_uint(key));
  if (v == 0 || v > max) return err(f.path(), ": ", key, " = ", v, " is out of range (1..", max, ")");
  return static_cast<int32_t>(v);
}

Result<int32_t> get_dim_or(const GgufFile& f, const std::string& key, uint64_t fallback,
                           uint64_t max) {
  if (!f.has(key)) return static_cast<int32_t>(fallback);
  return get_dim(f, key, max);
}

bool is_gemma(const std::string& arch) { return arch == "gemma2" || arch == "gemma3"; }

Result<float> get_positive_float_or(const GgufFile& f, const std::string& key, double fallback) {
  DUET_ASSIGN(double v, f.get_float_or(key, fallback));
  if (!(v >= 0.0 && v < 1e9)) return err(f.path(), ": ", key, " = ", v, " is out of range");
  return static_cast<float>(v);
}

// Gemma's fixed traits and its keys. The query scale is GGUF's
// attention.scale when given; llama.cpp's converters omit it and the 27B
// models, whose query_pre_attn_scalar is dim / heads rather than head_dim,
// are told apart by depth as llama.cpp does.
Status read_gemma(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch, s); };
  const bool gemma2 = c.arch == "gemma2";
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  c.ffn_act = FfnActivation::kGeluTanh;
  c.swa_period = gemma2 ? 2 : 6;
  if (!gemma2) c.rope_base_local = 10000.0f;
  if (!f.has(key(n::kSlidingWindow)))
    return err(f.path(), ": ", key(n::kSlidingWindow), " is missing (", c.arch, " alternates local and global layers)");
  if (gemma2) {
    DUET_ASSIGN(c.attn_softcap, get_positive_float_or(f, key(n::kAttnSoftcap), 50.0));
    DUET_ASSIGN(c.final_softcap, get_positive_float_or(f, key(n::kFinalSoftcap), 30.0));
  }
  const bool is_27b = c.n_layers == (gemma2 ? 46 : 62);
  const float fallback = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.dim / c.n_heads : c.head_dim));
  DUET_ASSIGN(c.query_scale, get_positive_float_or(f, key(n::kAttnScale), fallback));
  return {};
}

// DeepSeek-V2's shared experts (expert_shared_count of them, run as one
// FFN of their summed width), routed-sum scale and leading dense layers.
Status read_deepseek2_experts(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch, s); };
  DUET_ASSIGN(const uint64_t shared, f.get_uint_or(key(n::kExpertSharedCount), 0));
  if (shared > 64) return err(f.path(), ": ", key(n::kExpertSharedCount), " ", shared, " is out of range (0..64)");
  c.shared_expert_ffn_dim = static_cast<int32_t>(shared) * c.expert_ffn_dim;
  DUET_ASSIGN(c.expert_weights_scale, get_positive_float_or(f, key(n::kExpertWeightsScale), 1.0));
  if (!(c.expert_weights_scale > 0.0f))
    return err(f.path(), ": ", key(n::kExpertWeightsScale), " must be positive");
  DUET_ASSIGN(const uint64_t gating, f.get_uint_or(key(n::kExpertGatingFunc), 1));
  if (gating != 1)
    return err(f.path(), ": ", key(n::kExpertGatingFunc), " ", gating,
               " is not supported (1, softmax; DeepSeek-V3's sigmoid scoring is not)");
  DUET_ASSIGN(const uint64_t dense, f.get_uint_or(key(n::kLeadingDenseBlockCount), 0));
  if (dense > static_cast<uint64_t>(c.n_layers))
    return err(f.path(), ": ", key(n::kLeadingDenseBlockCount), " ", dense, " is more than the ", c.n_layers, " layers");
  c.n_dense_leading = static_cast<int32_t>(dense);
  return {};
}

// Multi-head latent attention: key_length is nope + rope (RoPE dims last),
// value_length the value width, kv_lora_rank the cached latent's width.
Status read_mla(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch, s); };
  DUET_ASSIGN(c.kv_lora_rank, get_dim(f, key(n::kKvLoraRank), kMaxDim));
  DUET_ASSIGN(const uint64_t q_lora, f.get_uint_or(key(n::kQLoraRank), 0));
  if (q_lora > kMaxDim) return err(f.path(), ": ", key(n::kQLoraRank), " ", q_lora, " is out of range");
  c.q_lora_rank = static_cast<int32_t>(q_lora);
  if (!f.has(key(n::kKeyLength)) || !f.has(key(n::kRopeDimCount)))
    return err(f.path(), ": ", c.arch, " needs ", key(n::kKeyLength), " and ", key(n::kRopeDimCount));
  if (c.rope_dim >= c.head_dim)
    return err(f.path(), ": ", key(n::kRopeDimCount), " ", c.rope_dim, " leaves no unrotated dims of the ",
               key(n::kKeyLength), " ", c.head_dim);
  DUET_ASSIGN(c.v_head_dim, get_dim(f, key(n::kValueLength), kMaxDim));
  c.n_kv_heads = c.n_heads;  // each head decompresses its own K and V from the one latent
  return {};
}

// expert_count 0 or absent: a dense model. Otherwise each token's top
// expert_used_count of them, each expert_feed_forward_length wide (Mixtral
// files give only feed_forward_length).
Status read_experts(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch, s); };
  DUET_ASSIGN(const uint64_t count, f.get_uint_or(key(n::kExpertCount), 0));
  if (count == 0) {
    if (c.arch == "qwen3moe" || c.arch == "qwen2moe" || c.arch == "olmoe")
      return err(f.path(), ": ", key(n::kExpertCount), " is missing (", c.arch, " is a mixture of experts)");
    return {};
  }
  if (count > kMaxExperts) return err(f.path(), ": ", key(n::kExpertCount), " ", count, " is out of range (1..", kMaxExperts, ")");
  c.n_experts = static_cast<int32_t>(count);
  DUET_ASSIGN(const uint64_t used, f.get_uint(key(n::kExpertUsedCount)));
  if (used < 1 || used > count)
    return err(f.path(), ": ", key(n::kExpertUsedCount), " ", used, " must be between 1 and the ", count, " experts");
  c.n_experts_used = static_cast<int32_t>(used);
  DUET_ASSIGN(c.expert_ffn_dim, get_dim_or(f, key(n::kExpertFfnLength), static_cast<uint64_t>(c.ffn_dim), kMaxDim * 8));
  if (f.has(key(n::kExpertWeightsNorm))) {
    DUET_ASSIGN(c.expert_weights_norm, f.get_bool(key(n::kExpertWeightsNorm)));
  } else if (c.arch == "qwen2moe" || c.arch == "deepseek2" || c.arch == "olmoe") {
    c.expert_weights_norm = false;  // llama.cpp's qwen2moe, deepseek2 and olmoe graphs do not renormalise
  }
  if (c.arch == "deepseek2") return read_deepseek2_experts(f, c);
  DUET_ASSIGN(const uint64_t shared, f.get_uint_or(key(n::kExpertSharedFfnLength), 0));
  if (shared > kMaxDim * 8) return err(f.path(), ": ", key(n::kExpertSharedFfnLength), " ", shared, " is out of range");
  c.shared_expert_ffn_dim = static_cast<int32_t>(shared);
  return {};
}

// The rope.scaling keys of a YaRN file (llama.cpp's names).
Status read_yarn(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(arch, s); };
  DUET_ASSIGN(const double factor, f.get_float(key(n::kRopeScalingFactor)));
  if (!(factor >= 1.0 && factor <= 1024.0))
    return err(f.path(), ": rope.scaling.factor ", factor, " out of range (1..1024)");
  DUET_ASSIGN(const uint64_t orig, f.get_uint(key(n::kRopeScalingOrigCtx)));
  if (orig < 1 || orig > (1u << 24))
    return err(f.path(), ": ", key(n::kRopeScalingOrigCtx), " ", orig, " out of range (1..16M)");
  DUET_ASSIGN(const double fast, f.get_float_or(key(n::kRopeScalingYarnBetaFast), 32.0));
  DUET_ASSIGN(const double slow, f.get_float_or(key(n::kRopeScalingYarnBetaSlow), 1.0));
  if (!(fast > slow && slow > 0.0))
    return err(f.path(), ": YaRN needs beta_fast > beta_slow > 0 (got ", fast, ", ", slow, ")");
  DUET_ASSIGN(const double log_mul, f.get_float_or(key(n::kRopeScalingYarnLogMul), 0.0));
  if (!(log_mul >= 0.0 && log_mul < 10.0))
    return err(f.path(), ": ", key(n::kRopeScalingYarnLogMul), " ", log_mul, " out of range (0..10)");
  c.yarn = {static_cast<float>(factor), static_cast<int32_t>(orig), static_cast<float>(fast),
            static_cast<float>(slow), static_cast<float>(log_mul)};
  // Without DeepSeek's multiplier the rotated dims of q and k carry it.
  if (arch != "deepseek2") c.rope_attn_factor = static_cast<float>(1.0 + 0.1 * std::log(factor));
  return {};
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
    case Pooling::kRank: return "rank";
  }
  return "unknown";
}

float ModelConfig::attn_scale() const {
  const float s = query_scale > 0.0f ? query_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (yarn.factor <= 1.0f || yarn.log_mul <= 0.0f) return s;
  const float m = 1.0f + yarn.log_mul * std::log(yarn.factor);
  return s * m * m;
}

Result<ModelConfig> read_model_config(const GgufFile& f) {
  ModelConfig c;
  DUET_ASSIGN(c.arch, f.get_string(n::kArchitecture));
  const bool llama_layout = c.arch == "llama" || c.arch == "mistral";
  const bool deepseek2 = c.arch == "deepseek2";
  const bool qwen = c.arch == "qwen2" || c.arch == "qwen2moe" || c.arch == "qwen3" || c.arch == "qwen3moe";
  if (!llama_layout && !qwen && !is_gemma(c.arch) && c.arch != "phi3" && c.arch != "olmoe" &&
      c.arch != "olmo2" && !deepseek2)
    return err(f.path(), ": unsupported architecture '", c.arch, "' (supported: ", kSupportedArchitectures, ")");
  // DeepSeek-V2 rotates adjacent pairs like llama's GGUF layout.
  c.rope_layout = llama_layout || deepseek2 ? RopeLayout::kNormal : RopeLayout::kNeox;
  if (f.has(n::kName)) {
    DUET_ASSIGN(c.name, f.get_string(n::kName));
  }
  const auto key = [&](const std::string& s) { return n::key(c.arch, s); };

  DUET_ASSIGN(c.dim, get_dim(f, key(n::kEmbeddingLength), kMaxDim));
  DUET_ASSIGN(c.n_layers, get_dim(f, key(n::kBlockCount), kMaxLayers));
  DUET_ASSIGN(c.n_heads, get_dim(f, key(n::kHeadCount), kMaxDim));
  DUET_ASSIGN(c.n_kv_heads, get_dim_or(f, key(n::kHeadCountKv), c.n_heads, kMaxDim));
  DUET_ASSIGN(c.ffn_dim, get_dim(f, key(n::kFeedForwardLength), kMaxDim * 8));
  DUET_ASSIGN(c.ctx_len, get_dim(f, key(n::kContextLength), 1u << 24));
  if (c.n_heads % c.n_kv_heads != 0)
    return err(f.path(), ": head_count ", c.n_heads, " is not a multiple of head_count_kv ",
               c.n_kv_heads);
  const int32_t default_head_dim = c.dim / c.n_heads;
  DUET_ASSIGN(c.head_dim, get_dim_or(f, key(n::kKeyLength), default_head_dim, kMaxDim));
  if (c.head_dim == 0 || (!f.has(key(n::kKeyLength)) && c.dim % c.n_heads != 0))
    return err(f.path(), ": embedding_length ", c.dim, " does not divide into ", c.n_heads,
               " heads and attention.key_length is not given");
  if (f.has(key(n::kValueLength)) && !deepseek2) {
    DUET_ASSIGN(int32_t v_len, get_dim(f, key(n::kValueLength), kMaxDim));
    if (v_len != c.head_dim)
      return err(f.path(), ": attention.value_length ", v_len, " differs from key_length ",
                 c.head_dim, " (unsupported)");
  }
  DUET_ASSIGN(c.rope_dim, get_dim_or(f, key(n::kRopeDimCount), c.head_dim, kMaxDim));
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return err(f.path(), ": rope.dimension_count ", c.rope_dim, " must be even and <= head dim ",
               c.head_dim);
  DUET_ASSIGN(double base, f.get_float_or(key(n::kRopeFreqBase), 10000.0));
  DUET_ASSIGN(double eps, f.get_float_or(key(n::kRmsEps), 1e-5));
  if (!(base > 1.0) || !(eps > 0.0 && eps < 1.0))
    return err(f.path(), ": rope.freq_base ", base, " or rms epsilon ", eps, " out of range");
  c.rope_base = static_cast<float>(base);
  c.rms_eps = static_cast<float>(eps);

  if (f.has(key(n::kRopeScalingType))) {
    DUET_ASSIGN(std::string type, f.get_string(key(n::kRopeScalingType)));
    if (type == "linear") {
      DUET_ASSIGN(double factor, f.get_float(key(n::kRopeScalingFactor)));
      if (!(factor >= 1.0 && factor <= 1024.0))
        return err(f.path(), ": rope.scaling.factor ", factor, " out of range (1..1024)");
      c.rope_linear_factor = static_cast<float>(factor);
    } else if (type == "yarn") {
      DUET_TRY(read_yarn(f, c.arch, c));
    } else if (type != "none") {
      return err(f.path(), ": unsupported rope.scaling.type '", type, "' (supported: none, linear, yarn)");
    }
  }
  DUET_ASSIGN(uint64_t window, f.get_uint_or(key(n::kSlidingWindow), 0));
  if (window > (1u << 24)) return err(f.path(), ": attention.sliding_window ", window, " out of range");
  c.sliding_window = static_cast<int32_t>(window);
  if (c.sliding_window > c.ctx_len)
    return err(f.path(), ": attention.sliding_window ", c.sliding_window, " is larger than the context ", c.ctx_len);
  DUET_ASSIGN(const uint64_t pooling, f.get_uint_or(key(n::kPoolingType), static_cast<uint64_t>(Pooling::kMean)));
  if (pooling > static_cast<uint64_t>(Pooling::kRank))
    return err(f.path(), ": ", key(n::kPoolingType), " ", pooling, " is out of range (0 none, 1 mean, 2 cls, 3 last, 4 rank)");
  c.pooling = static_cast<Pooling>(pooling);
  if (is_gemma(c.arch)) DUET_TRY(read_gemma(f, c));
  if (f.tensor(n::kRopeFactorsLong)) {
    DUET_ASSIGN(c.rope_orig_ctx, get_dim(f, key(n::kRopeScalingOrigCtx), 1u << 24));
    DUET_ASSIGN(c.rope_attn_factor, get_positive_float_or(f, key(n::kRopeScalingAttnFactor), 1.0));
  }

  if (deepseek2) DUET_TRY(read_mla(f, c));
  DUET_TRY(read_experts(f, c));

  const TensorView* embd = f.tensor(n::kTokenEmbd);
  if (!embd) return err(f.path(), ": missing tensor ", n::kTokenEmbd);
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return c;
}

void write_model_config(GgufWriter& w, const ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch, s); };
  const auto u32 = [](int32_t v) { return GgufValue::of_u32(static_cast<uint32_t>(v)); };
  w.set(n::kArchitecture, GgufValue::of_string(c.arch));
  w.set(n::kName, GgufValue::of_string(c.name));
  w.set(key(n::kContextLength), u32(c.ctx_len));
  w.set(key(n::kEmbeddingLength), u32(c.dim));
  w.set(key(n::kBlockCount), u32(c.n_layers));
  w.set(key(n::kFeedForwardLength), u32(c.ffn_dim));
  w.set(key(n::kHeadCount), u32(c.n_heads));
  w.set(key(n::kHeadCountKv), u32(c.n_kv_heads));
  if (c.mla()) {
    w.set(key(n::kKeyLength), u32(c.head_dim));
    w.set(key(n::kValueLength), u32(c.v_head_dim));
    w.set(key(n::kKvLoraRank), u32(c.kv_lora_rank));
    if (c.q_lora_rank > 0) w.set(key(n::kQLoraRank), u32(c.q_lora_rank));
  } else if (c.q_dim() != c.dim) {
    w.set(key(n::kKeyLength), u32(c.head_dim));
    w.set(key(n::kValueLength), u32(c.head_dim));
  }
  w.set(key(n::kRopeDimCount), u32(c.rope_dim));
  w.set(key(n::kRopeFreqBase), GgufValue::of_f32(c.rope_base));
  w.set(key(n::kRmsEps), GgufValue::of_f32(c.rms_eps));
  w.set(key(n::kVocabSize), u32(c.n_vocab));
  if (c.rope_linear_factor != 1.0f) {
    w.set(key(n::kRopeScalingType), GgufValue::of_string("linear"));
    w.set(key(n::kRopeScalingFactor), GgufValue::of_f32(c.rope_linear_factor));
  }
  if (c.yarn.factor > 0.0f) {
    w.set(key(n::kRopeScalingType), GgufValue::of_string("yarn"));
    w.set(key(n::kRopeScalingFactor), GgufValue::of_f32(c.yarn.factor));
    w.set(key(n::kRopeScalingOrigCtx), u32(c.yarn.orig_ctx));
    w.set(key(n::kRopeScalingYarnBetaFast), GgufValue::of_f32(c.yarn.beta_fast));
    w.set(key(n::kRopeScalingYarnBetaSlow), GgufValue::of_f32(c.yarn.beta_slow));
    if (c.yarn.log_mul > 0.0f) w.set(key(n::kRopeScalingYarnLogMul), GgufValue::of_f32(c.yarn.log_mul));
  }
  if (c.sliding_window > 0) w.set(key(n::kSlidingWindow), u32(c.sliding_window));
  if (c.rope_orig_ctx > 0) {
    w.set(key(n::kRopeScalingOrigCtx), u32(c.rope_orig_ctx));
    w.set(key(n::kRopeScalingAttnFactor), GgufValue::of_f32(c.rope_attn_factor));
  }
  if (c.attn_softcap > 0.0f) w.set(key(n::kAttnSoftcap), GgufValue::of_f32(c.attn_softcap));
  if (c.final_softcap > 0.0f) w.set(key(n::kFinalSoftcap), GgufValue::of_f32(c.final_softcap));
  if (c.query_scale > 0.0f) w.set(key(n::kAttnScale), GgufValue::of_f32(c.query_scale));
  if (c.pooling != Pooling::kMean) w.set(key(n::kPoolingType), u32(static_cast<int32_t>(c.pooling)));
  if (c.moe()) {
    w.set(key(n::kExpertCount), u32(c.n_experts));
    w.set(key(n::kExpertUsedCount), u32(c.n_experts_used));
    w.set(key(n::kExpertFfnLength), u32(c.expert_ffn_dim));
    w.set(key(n::kExpertWeightsNorm), GgufValue::of_bool(c.expert_weights_norm));
    if (c.arch == "deepseek2") {
      w.set(key(n::kExpertSharedCount), u32(c.shared_expert_ffn_dim / c.expert_ffn_dim));
      w.set(key(n::kExpertWeightsScale), GgufValue::of_f32(c.expert_weights_scale));
      w.set(key(n::kLeadingDenseBlockCount), u32(c.n_dense_leading));
      w.set(key(n::kExpertGatingFunc), u32(1));
    } else if (c.shared_expert_ffn_dim > 0) {
      w.set(key(n::kExpertSharedFfnLength), u32(c.shared_expert_ffn_dim));
    }
  }
}

}  // namespace duet
