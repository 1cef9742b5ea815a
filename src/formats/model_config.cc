#include "formats/model_config.h"

#include <algorithm>
#include <cmath>

#include "formats/arch/arch.h"
#include "formats/gguf.h"
#include "formats/gguf_keys_read.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

namespace n = gguf_names;
using gguf_read::dim;
using gguf_read::dim_or;
using gguf_read::kMaxDim;
using gguf_read::kMaxExperts;
using gguf_read::kMaxLayers;
using gguf_read::positive_float_or;

// expert_count 0 or absent: a dense model. Otherwise each token's top
// expert_used_count of them, each expert_feed_forward_length wide (Mixtral
// files give only feed_forward_length); the layers without a router keep a
// dense FFN.
Status read_experts(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
  const ArchTraits& traits = arch_traits(c.arch);
  DUET_ASSIGN(const uint64_t count, f.get_uint_or(key(n::kExpertCount), 0));
  if (count == 0) {
    if (traits.experts != Experts::kOptional)
      return err(f.path(), ": ", key(n::kExpertCount), " is missing (", c.arch_name(), " is a mixture of experts)");
    return {};
  }
  if (count > kMaxExperts) return err(f.path(), ": ", key(n::kExpertCount), " ", count, " is out of range (1..", kMaxExperts, ")");
  c.n_experts = static_cast<int32_t>(count);
  DUET_ASSIGN(const uint64_t used, f.get_uint(key(n::kExpertUsedCount)));
  if (used < 1 || used > count)
    return err(f.path(), ": ", key(n::kExpertUsedCount), " ", used, " must be between 1 and the ", count, " experts");
  c.n_experts_used = static_cast<int32_t>(used);
  DUET_ASSIGN(c.expert_ffn_dim, dim_or(f, key(n::kExpertFfnLength), static_cast<uint64_t>(c.ffn_dim), kMaxDim * 8));
  c.expert_weights_norm = traits.expert_weights_norm;
  if (f.has(key(n::kExpertWeightsNorm))) {
    DUET_ASSIGN(c.expert_weights_norm, f.get_bool(key(n::kExpertWeightsNorm)));
  }
  DUET_ASSIGN(const uint64_t shared, f.get_uint_or(key(n::kExpertSharedFfnLength), 0));
  if (shared > kMaxDim * 8) return err(f.path(), ": ", key(n::kExpertSharedFfnLength), " ", shared, " is out of range");
  c.shared_expert_ffn_dim = static_cast<int32_t>(shared);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    if (f.tensor(n::blk(l, n::kFfnRouter))) continue;
    if (traits.experts == Experts::kEveryLayer)
      return err(f.path(), ": layer ", l, " has no router (", n::blk(l, n::kFfnRouter), "); every ", c.arch_name(),
                 " layer is a mixture of experts");
    c.dense_layers.push_back(l);
  }
  return {};
}

// A router where the file names no experts.
Status check_no_router(const GgufFile& f, const ModelConfig& c) {
  for (int32_t l = 0; l < c.n_layers; ++l)
    if (f.tensor(n::blk(l, n::kFfnRouter)))
      return err(f.path(), ": layer ", l, " has a router (", n::blk(l, n::kFfnRouter),
                 ") but the file sets no expert_count");
  return {};
}

// q, k and v biases: where the architecture has them and the file too.
Status read_attention_bias(const GgufFile& f, ModelConfig& c) {
  const bool present = f.tensor(n::blk_bias(0, n::kAttnQ)) != nullptr;
  const AttnBias bias = arch_traits(c.arch).attn_bias;
  if (present && bias == AttnBias::kNever)
    return err(f.path(), ": layer 0 has attention biases (", n::blk_bias(0, n::kAttnQ), "), which ", c.arch_name(),
               " does not");
  c.qkv_bias = present;
  return {};
}

// The rope.scaling keys of a YaRN file (llama.cpp's names).
Status read_yarn(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
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
  // Without an attention multiplier the rotated dims of q and k carry it.
  if (!arch_traits(c.arch).yarn_scales_attention) c.rope_attn_factor = static_cast<float>(1.0 + 0.1 * std::log(factor));
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

bool ModelConfig::moe_layer(int32_t layer) const {
  return moe() && layer >= n_dense_leading &&
         std::find(dense_layers.begin(), dense_layers.end(), layer) == dense_layers.end();
}

bool ModelConfig::qk_norm_spans_heads() const { return arch_traits(arch).qk_norm == QkNorm::kAcrossHeads; }

float ModelConfig::attn_scale() const {
  const float s = query_scale > 0.0f ? query_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (yarn.factor <= 1.0f || yarn.log_mul <= 0.0f) return s;
  const float m = 1.0f + yarn.log_mul * std::log(yarn.factor);
  return s * m * m;
}

Result<ModelConfig> read_model_config(const GgufFile& f) {
  ModelConfig c;
  DUET_ASSIGN(const std::string arch, f.get_string(n::kArchitecture));
  const ArchRecord* record = find_arch(arch);
  if (!record)
    return err(f.path(), ": unsupported architecture '", arch, "' (supported: ", supported_architectures(), ")");
  c.arch = record->arch;
  c.rope_layout = record->traits.rope_layout;
  c.ffn_act = record->traits.ffn_act;
  if (f.has(n::kName)) {
    DUET_ASSIGN(c.name, f.get_string(n::kName));
  }
  const auto key = [&](const std::string& s) { return n::key(arch, s); };

  DUET_ASSIGN(c.dim, dim(f, key(n::kEmbeddingLength), kMaxDim));
  DUET_ASSIGN(c.n_layers, dim(f, key(n::kBlockCount), kMaxLayers));
  DUET_ASSIGN(c.n_heads, dim(f, key(n::kHeadCount), kMaxDim));
  DUET_ASSIGN(c.n_kv_heads, dim_or(f, key(n::kHeadCountKv), c.n_heads, kMaxDim));
  DUET_ASSIGN(c.ffn_dim, dim(f, key(n::kFeedForwardLength), kMaxDim * 8));
  DUET_ASSIGN(c.ctx_len, dim(f, key(n::kContextLength), 1u << 24));
  if (c.n_heads % c.n_kv_heads != 0)
    return err(f.path(), ": head_count ", c.n_heads, " is not a multiple of head_count_kv ",
               c.n_kv_heads);
  const int32_t default_head_dim = c.dim / c.n_heads;
  DUET_ASSIGN(c.head_dim, dim_or(f, key(n::kKeyLength), default_head_dim, kMaxDim));
  if (c.head_dim == 0 || (!f.has(key(n::kKeyLength)) && c.dim % c.n_heads != 0))
    return err(f.path(), ": embedding_length ", c.dim, " does not divide into ", c.n_heads,
               " heads and attention.key_length is not given");
  if (f.has(key(n::kValueLength)) && !record->traits.latent_attention) {
    DUET_ASSIGN(int32_t v_len, dim(f, key(n::kValueLength), kMaxDim));
    if (v_len != c.head_dim)
      return err(f.path(), ": attention.value_length ", v_len, " differs from key_length ",
                 c.head_dim, " (unsupported)");
  }
  DUET_ASSIGN(c.rope_dim, dim_or(f, key(n::kRopeDimCount), c.head_dim, kMaxDim));
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
      DUET_TRY(read_yarn(f, c));
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
  if (f.tensor(n::kRopeFactorsLong)) {
    DUET_ASSIGN(c.rope_orig_ctx, dim(f, key(n::kRopeScalingOrigCtx), 1u << 24));
    DUET_ASSIGN(c.rope_attn_factor, positive_float_or(f, key(n::kRopeScalingAttnFactor), 1.0));
  }
  DUET_TRY(read_experts(f, c));
  if (!c.moe()) DUET_TRY(check_no_router(f, c));
  DUET_TRY(read_attention_bias(f, c));
  if (record->read_gguf) DUET_TRY(record->read_gguf(f, c));

  const TensorView* embd = f.tensor(n::kTokenEmbd);
  if (!embd) return err(f.path(), ": missing tensor ", n::kTokenEmbd);
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return c;
}

void write_model_config(GgufWriter& w, const ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
  const auto u32 = [](int32_t v) { return GgufValue::of_u32(static_cast<uint32_t>(v)); };
  w.set(n::kArchitecture, GgufValue::of_string(c.arch_name()));
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
  }
  const ArchRecord& record = arch_record(c.arch);
  if (record.write_gguf) return record.write_gguf(w, c);
  if (c.moe() && c.shared_expert_ffn_dim > 0) w.set(key(n::kExpertSharedFfnLength), u32(c.shared_expert_ffn_dim));
}

}  // namespace duet
