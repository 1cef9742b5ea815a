#include "formats/hf_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_parse.h"
#include "formats/arch/arch.h"
#include "formats/hf_json.h"

namespace duet {
namespace {

using namespace hf_json;

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
  const bool scales_attention = arch_traits(m.arch).yarn_scales_attention;
  if (scales_attention ? rs.mscale != rs.mscale_all_dim : (rs.mscale != 1.0 || rs.mscale_all_dim != 0.0))
    return err(src, ": rope_scaling mscale ", rs.mscale, " with mscale_all_dim ", rs.mscale_all_dim,
               " is not supported for ", m.arch_name(), scales_attention ? " (they must be equal)" : "");
  m.yarn = {static_cast<float>(rs.factor), rs.original_max_position_embeddings, static_cast<float>(rs.beta_fast),
            static_cast<float>(rs.beta_slow), static_cast<float>(scales_attention ? 0.1 * rs.mscale_all_dim : 0.0)};
  if (!scales_attention) m.rope_attn_factor = static_cast<float>(1.0 + 0.1 * std::log(rs.factor));
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

// q, k and v biases: always, where attention_bias says, or never.
Status read_attention_bias(const json& j, const std::string& src, HfConfig& c) {
  const AttnBias bias = arch_traits(c.model.arch).attn_bias;
  c.model.qkv_bias = bias == AttnBias::kAlways;
  if (bias == AttnBias::kAlways) return {};
  DUET_TRY(read_bool(j, "attention_bias", src, &c.model.qkv_bias));
  if (c.model.qkv_bias && bias == AttnBias::kNever)
    return err(src, ": attention_bias is not supported for ", c.hf_architecture);
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
  const HfClass* hf_class = nullptr;
  const ArchRecord* record = find_hf_class(c.hf_architecture, &hf_class);
  if (!record)
    return err(src, ": architecture ", c.hf_architecture, " is not supported (supported: ", supported_hf_classes(), ")");
  const ArchTraits& traits = record->traits;
  ModelConfig& m = c.model;
  m.arch = record->arch;
  m.rope_layout = traits.rope_layout;
  m.ffn_act = traits.ffn_act;
  m.rms_eps = traits.hf_rms_eps;  // the transformers classes' defaults, not GGUF's

  // A family with another activation checks it in its own reader.
  if (const json* act = field(j, "hidden_act"); act && *act != "silu" && traits.ffn_act == FfnActivation::kSilu)
    return err(src, ": hidden_act ", act->dump(), " is not supported (silu only)");
  DUET_TRY(read_int(j, "vocab_size", src, 1, 1 << 24, &m.n_vocab, true));
  DUET_TRY(read_int(j, "hidden_size", src, 1, kMaxDim, &m.dim, true));
  DUET_TRY(read_int(j, "intermediate_size", src, 1, 8 * kMaxDim, &m.ffn_dim, true));
  DUET_TRY(read_int(j, "num_hidden_layers", src, 1, 4096, &m.n_layers, true));
  DUET_TRY(read_int(j, "num_attention_heads", src, 1, kMaxDim, &m.n_heads, true));
  m.n_kv_heads = m.n_heads;
  DUET_TRY(read_int(j, "num_key_value_heads", src, 1, kMaxDim, &m.n_kv_heads));
  if (m.n_heads % m.n_kv_heads != 0)
    return err(src, ": num_attention_heads ", m.n_heads, " is not a multiple of num_key_value_heads ", m.n_kv_heads);
  if (!field(j, "head_dim") && m.dim % m.n_heads != 0)
    return err(src, ": hidden_size ", m.dim, " does not divide into ", m.n_heads, " heads and head_dim is not given");
  m.head_dim = m.dim / m.n_heads;
  DUET_TRY(read_int(j, "head_dim", src, 2, kMaxDim, &m.head_dim));
  if (m.head_dim % 2 != 0) return err(src, ": head_dim ", m.head_dim, " must be even for RoPE");
  m.ctx_len = 2048;
  DUET_TRY(read_int(j, "max_position_embeddings", src, 1, 1 << 24, &m.ctx_len));
  DUET_TRY(read_float(j, "rope_theta", src, &m.rope_base));
  DUET_TRY(read_float(j, "rms_norm_eps", src, &m.rms_eps));
  if (!(m.rope_base > 1.0) || !(m.rms_eps > 0 && m.rms_eps < 1))
    return err(src, ": rope_theta ", m.rope_base, " or rms_norm_eps ", m.rms_eps, " out of range");
  m.tied_output = traits.hf_tied;
  DUET_TRY(read_bool(j, "tie_word_embeddings", src, &m.tied_output));
  DUET_TRY(read_attention_bias(j, src, c));
  bool mlp_bias = false;
  DUET_TRY(read_bool(j, "mlp_bias", src, &mlp_bias));
  if (mlp_bias) return err(src, ": mlp_bias is not supported");
  DUET_TRY(read_rope_scaling(j, src, &c.rope_scaling));
  if (c.rope_scaling.type == "linear") m.rope_linear_factor = static_cast<float>(c.rope_scaling.factor);
  m.rope_dim = m.head_dim;
  if (const json* clip = field(j, "clip_qkv"); clip && !clip->is_null())
    return err(src, ": clip_qkv ", clip->dump(), " is not supported (null)");
  if (hf_class->read) DUET_TRY(hf_class->read(j, src, c));
  if (c.rope_scaling.type == "longrope") DUET_TRY(set_longrope(j, src, c));
  if (c.rope_scaling.type == "yarn") DUET_TRY(set_yarn(src, c));
  DUET_TRY(read_token_id(j, "bos_token_id", src, &c.bos_token_id));
  DUET_TRY(read_token_id(j, "eos_token_id", src, &c.eos_token_id));
  if (const json* q = field(j, "quantization_config")) {
    DUET_ASSIGN(c.quant, parse_hf_quantization(*q, src));
  }
  return c;
}

bool HfConfig::permute_qk() const { return arch_traits(model.arch).hf_permute_qk; }

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
