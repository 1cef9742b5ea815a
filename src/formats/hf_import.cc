#include "formats/hf_import.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <set>

#include "core/half.h"
#include "formats/file_type.h"
#include "formats/hf_tokenizer_import.h"
#include "formats/llama_import.h"
#include "formats/llama_names.h"
#include "formats/spm_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
namespace n = gguf_names;

float load_elem(const uint8_t* p, DType t) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void store_elem(float f, uint8_t* p, DType t) {
  if (t == DType::F32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = t == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
  std::memcpy(p, &h, 2);
}

// Copies `count` elements, converting the type when the two differ.
void copy_elems(const uint8_t* src, DType st, uint8_t* dst, DType dt, int64_t count) {
  const size_t ss = static_cast<size_t>(traits(st).block_bytes);
  const size_t ds = static_cast<size_t>(traits(dt).block_bytes);
  if (st == dt) {
    std::memcpy(dst, src, static_cast<size_t>(count) * ss);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    store_elem(load_elem(src + static_cast<size_t>(i) * ss, st), dst + static_cast<size_t>(i) * ds, dt);
}

// The HF row of GGUF row r: within each head of `hd` rows, GGUF's pair
// (2i, 2i+1) is HF's (i, i + hd/2).
int64_t hf_row(int64_t r, int64_t hd) {
  const int64_t head = r / hd, in_head = r % hd;
  return head * hd + (in_head % 2) * (hd / 2) + in_head / 2;
}

std::string layer_prefix(int64_t l) { return "model.layers." + std::to_string(l) + "."; }

}  // namespace

Result<std::shared_ptr<HfCheckpoint>> HfCheckpoint::open(const std::string& dir) {
  auto ck = std::shared_ptr<HfCheckpoint>(new HfCheckpoint());
  ck->dir_ = dir;
  if (!fs::is_directory(dir)) return err(dir, ": not a directory");
  DUET_ASSIGN(ck->config_, read_hf_config((fs::path(dir) / "config.json").string()));
  DUET_ASSIGN(ck->weights_, SafetensorsCheckpoint::open_dir(dir));
  DUET_TRY(ck->plan_tensors());
  DUET_TRY(ck->set_metadata());
  return ck;
}

Status HfCheckpoint::plan_tensors() {
  const HfConfig& c = config_;
  const ModelConfig& m = c.model;
  std::set<std::string> used;
  // shape is HF's [out, in] (or [n] for vectors).
  auto add = [&](const std::string& hf_name, std::string gguf_name, std::vector<int64_t> shape,
                 int32_t permute_heads, float plus) -> Status {
    const bool matrix = shape.size() == 2 && hf_name.size() > 7 &&
                        hf_name.compare(hf_name.size() - 7, 7, ".weight") == 0;
    const std::string layer = matrix ? hf_name.substr(0, hf_name.size() - 7) : hf_name;
    if (matrix) {
      DUET_ASSIGN(std::optional<QuantizedLinear> q,
                  QuantizedLinear::find(weights_, c.quant, dir_, layer, shape[0], shape[1]));
      if (q) {
        used.insert(q->sources().begin(), q->sources().end());
        plans_.push_back({std::move(gguf_name), nullptr, c.permute_qk() ? permute_heads : 0, 0.0f,
                          std::make_shared<const QuantizedLinear>(std::move(*q)), "", -1});
        return {};
      }
    }
    const SafetensorsTensor* t = weights_.find(hf_name);
    if (!t && matrix && weights_.find(layer + ".qweight"))
      return err(dir_, ": missing tensor ", hf_name, " (the folder holds ", layer,
                 ".qweight but config.json has no GPTQ or AWQ quantization_config)");
    if (!t) return err(dir_, ": missing tensor ", hf_name);
    DUET_TRY(check_plain(*t));
    if (t->shape != shape) {
      std::string got, want;
      for (int64_t d : t->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      return err(dir_, ": tensor ", hf_name, " has shape [", got, "] but config.json implies [",
                 want, "]");
    }
    used.insert(hf_name);
    plans_.push_back({std::move(gguf_name), t, c.permute_qk() ? permute_heads : 0, plus, nullptr, "", -1});
    return {};
  };

  const float norm_plus = m.arch == "gemma2" || m.arch == "gemma3" ? 1.0f : 0.0f;
  DUET_TRY(add("model.embed_tokens.weight", n::kTokenEmbd, {m.n_vocab, m.dim}, 0, 0.0f));
  for (int64_t l = 0; l < m.n_layers; ++l) DUET_TRY(plan_layer(l, add));
  DUET_TRY(add("model.norm.weight", n::kOutputNorm, {m.dim}, 0, norm_plus));
  // Tied: transformers ignores a stored lm_head; GGUF says so by omitting output.weight.
  if (!m.tied_output) DUET_TRY(add("lm_head.weight", n::kOutput, {m.n_vocab, m.dim}, 0, 0.0f));
  if (c.rope_scaling.type == "llama3") DUET_TRY(add_computed(n::kRopeFreqs, llama3_rope_divisors(c)));
  if (c.rope_scaling.type == "longrope") {
    DUET_TRY(add_computed(n::kRopeFactorsShort, c.rope_scaling.short_factor));
    DUET_TRY(add_computed(n::kRopeFactorsLong, c.rope_scaling.long_factor));
  }

  for (const SafetensorsTensor* t : weights_.tensors()) {
    if (used.count(t->name)) continue;
    const bool old_rope_cache = t->name.size() > 20 &&
                                t->name.compare(t->name.size() - 20, 20, "rotary_emb.inv_freq") == 0;
    const bool tied_head = m.tied_output && t->name == "lm_head.weight";
    if (!old_rope_cache && !tied_head)
      return err(dir_, ": unexpected tensor ", t->name, " for ", c.hf_architecture, " with ",
                 m.n_layers, " layers", m.qkv_bias ? "" : " and no attention bias");
  }
  return {};
}

// A tensor read as plain floats must be stored as floats: an int or FP8
// tensor here is a quantized layer the config did not declare.
Status HfCheckpoint::check_plain(const SafetensorsTensor& t) const {
  if (!t.fp8_e4m3 && (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16)) return {};
  const std::string stored = t.fp8_e4m3 ? "F8_E4M3" : std::string(dtype_name(t.dtype));
  if (config_.quant.method == HfQuantMethod::kNone)
    return err(dir_, ": tensor ", t.name, " is stored as ", stored, " but config.json has no quantization_config");
  return err(dir_, ": tensor ", t.name, " is stored as ", stored, ", which quant_method ", config_.quant.name,
             " does not use for it (F32, F16 or BF16 expected)");
}

// One layer's tensors: HF's names for the architecture, GGUF's as
// llama.cpp's converter gives them.
Status HfCheckpoint::plan_layer(
    int64_t l, const std::function<Status(const std::string&, std::string, std::vector<int64_t>, int32_t, float)>& add) {
  const ModelConfig& m = config_.model;
  const int64_t q_dim = int64_t{m.n_heads} * m.head_dim;
  const int64_t kv_dim = int64_t{m.n_kv_heads} * m.head_dim;
  const std::string p = layer_prefix(l);
  const int b = static_cast<int>(l);
  const bool gemma = m.arch == "gemma2" || m.arch == "gemma3";
  const float plus = gemma ? 1.0f : 0.0f;
  const bool olmo2 = m.arch == "olmo2";  // its norms follow attention and the MLP, none precede them
  if (!olmo2) DUET_TRY(add(p + "input_layernorm.weight", n::blk(b, n::kAttnNorm), {m.dim}, 0, plus));
  if (m.arch == "deepseek2") {
    // Multi-head latent attention; RoPE dims need no permutation, as HF's
    // DeepSeek-V2 de-interleaves them before its rotate-half, which rotates
    // the adjacent pairs GGUF's normal layout does.
    const std::string a = p + "self_attn.";
    if (m.q_lora_rank > 0) {
      DUET_TRY(add(a + "q_a_proj.weight", n::blk(b, n::kAttnQA), {m.q_lora_rank, m.dim}, 0, 0.0f));
      DUET_TRY(add(a + "q_a_layernorm.weight", n::blk(b, n::kAttnQANorm), {m.q_lora_rank}, 0, 0.0f));
      DUET_TRY(add(a + "q_b_proj.weight", n::blk(b, n::kAttnQB), {q_dim, m.q_lora_rank}, 0, 0.0f));
    } else {
      DUET_TRY(add(a + "q_proj.weight", n::blk(b, n::kAttnQ), {q_dim, m.dim}, 0, 0.0f));
    }
    DUET_TRY(add(a + "kv_a_proj_with_mqa.weight", n::blk(b, n::kAttnKvA), {m.latent_dim(), m.dim}, 0, 0.0f));
    DUET_TRY(add(a + "kv_a_layernorm.weight", n::blk(b, n::kAttnKvANorm), {m.kv_lora_rank}, 0, 0.0f));
    DUET_TRY(add(a + "kv_b_proj.weight", n::blk(b, n::kAttnKvB),
                 {int64_t{m.n_heads} * (m.nope_dim() + m.v_head_dim), m.kv_lora_rank}, 0, 0.0f));
  } else if (m.arch == "phi3") {
    DUET_TRY(add(p + "self_attn.qkv_proj.weight", n::blk(b, n::kAttnQkv), {q_dim + 2 * kv_dim, m.dim}, 0, 0.0f));
  } else {
    DUET_TRY(add(p + "self_attn.q_proj.weight", n::blk(b, n::kAttnQ), {q_dim, m.dim}, m.n_heads, 0.0f));
    DUET_TRY(add(p + "self_attn.k_proj.weight", n::blk(b, n::kAttnK), {kv_dim, m.dim}, m.n_kv_heads, 0.0f));
    DUET_TRY(add(p + "self_attn.v_proj.weight", n::blk(b, n::kAttnV), {kv_dim, m.dim}, 0, 0.0f));
  }
  if (m.qkv_bias) {
    DUET_TRY(add(p + "self_attn.q_proj.bias", n::blk_bias(b, n::kAttnQ), {q_dim}, m.n_heads, 0.0f));
    DUET_TRY(add(p + "self_attn.k_proj.bias", n::blk_bias(b, n::kAttnK), {kv_dim}, m.n_kv_heads, 0.0f));
    DUET_TRY(add(p + "self_attn.v_proj.bias", n::blk_bias(b, n::kAttnV), {kv_dim}, 0, 0.0f));
  }
  if (m.arch == "qwen3" || m.arch == "qwen3moe" || m.arch == "gemma3" || m.qk_norm_spans_heads()) {  // not qwen2moe
    const bool spans = m.qk_norm_spans_heads();
    DUET_TRY(add(p + "self_attn.q_norm.weight", n::blk(b, n::kAttnQNorm), {spans ? q_dim : m.head_dim}, 0, plus));
    DUET_TRY(add(p + "self_attn.k_norm.weight", n::blk(b, n::kAttnKNorm), {spans ? kv_dim : m.head_dim}, 0, plus));
  }
  const int64_t o_in = m.mla() ? int64_t{m.n_heads} * m.v_head_dim : q_dim;
  DUET_TRY(add(p + "self_attn.o_proj.weight", n::blk(b, n::kAttnOut), {m.dim, o_in}, 0, 0.0f));
  if (gemma) {  // Gemma's post_attention_layernorm follows attention; its FFN has a pre- and a post-norm
    DUET_TRY(add(p + "post_attention_layernorm.weight", n::blk(b, n::kPostAttnNorm), {m.dim}, 0, plus));
    DUET_TRY(add(p + "pre_feedforward_layernorm.weight", n::blk(b, n::kFfnNorm), {m.dim}, 0, plus));
    DUET_TRY(add(p + "post_feedforward_layernorm.weight", n::blk(b, n::kPostFfnNorm), {m.dim}, 0, plus));
  } else if (olmo2) {
    DUET_TRY(add(p + "post_attention_layernorm.weight", n::blk(b, n::kPostAttnNorm), {m.dim}, 0, 0.0f));
    DUET_TRY(add(p + "post_feedforward_layernorm.weight", n::blk(b, n::kPostFfnNorm), {m.dim}, 0, 0.0f));
  } else {
    DUET_TRY(add(p + "post_attention_layernorm.weight", n::blk(b, n::kFfnNorm), {m.dim}, 0, 0.0f));
  }
  if (config_.moe_layer(b)) {
    DUET_TRY(plan_experts(l, add));
  } else if (m.arch == "phi3") {
    DUET_TRY(add(p + "mlp.gate_up_proj.weight", n::blk(b, n::kFfnUp), {2 * int64_t{m.ffn_dim}, m.dim}, 0, 0.0f));
  } else {
    DUET_TRY(add(p + "mlp.gate_proj.weight", n::blk(b, n::kFfnGate), {m.ffn_dim, m.dim}, 0, 0.0f));
    DUET_TRY(add(p + "mlp.up_proj.weight", n::blk(b, n::kFfnUp), {m.ffn_dim, m.dim}, 0, 0.0f));
  }
  if (!config_.moe_layer(b))
    DUET_TRY(add(p + "mlp.down_proj.weight", n::blk(b, n::kFfnDown), {m.dim, m.ffn_dim}, 0, 0.0f));
  return {};
}

// A mixture-of-experts layer: the router, then every expert's gate, every
// up, every down (each kind's experts consecutive, so convert can stack
// them as GGUF's ffn_*_exps). Mixtral calls gate, down, up w1, w2, w3.
Status HfCheckpoint::plan_experts(
    int64_t l, const std::function<Status(const std::string&, std::string, std::vector<int64_t>, int32_t, float)>& add) {
  const ModelConfig& m = config_.model;
  const bool mixtral = config_.hf_architecture == "MixtralForCausalLM";
  const std::string p = layer_prefix(l) + (mixtral ? "block_sparse_moe." : "mlp.");
  const int b = static_cast<int>(l);
  DUET_TRY(add(p + "gate.weight", n::blk(b, n::kFfnRouter), {m.n_experts, m.dim}, 0, 0.0f));
  struct Kind {
    const char* hf;
    const std::string& split;
    const std::string& stacked;
    int64_t rows, cols;
  };
  const Kind kinds[] = {{mixtral ? "w1" : "gate_proj", n::kFfnGate, n::kFfnGateExps, m.expert_ffn_dim, m.dim},
                        {mixtral ? "w3" : "up_proj", n::kFfnUp, n::kFfnUpExps, m.expert_ffn_dim, m.dim},
                        {mixtral ? "w2" : "down_proj", n::kFfnDown, n::kFfnDownExps, m.dim, m.expert_ffn_dim}};
  for (const Kind& k : kinds)
    for (int e = 0; e < m.n_experts; ++e) {
      DUET_TRY(add(p + "experts." + std::to_string(e) + "." + k.hf + ".weight", n::blk_expert(b, k.split, e),
                   {k.rows, k.cols}, 0, 0.0f));
      plans_.back().stacked = n::blk(b, k.stacked);
      plans_.back().expert = e;
    }
  if (m.shared_expert_ffn_dim == 0) return {};
  const int64_t shared = m.shared_expert_ffn_dim;
  if (m.arch == "deepseek2") {  // its shared experts are one ungated MLP of their summed width
    DUET_TRY(add(p + "shared_experts.gate_proj.weight", n::blk(b, n::kFfnGateShexp), {shared, m.dim}, 0, 0.0f));
    DUET_TRY(add(p + "shared_experts.up_proj.weight", n::blk(b, n::kFfnUpShexp), {shared, m.dim}, 0, 0.0f));
    return add(p + "shared_experts.down_proj.weight", n::blk(b, n::kFfnDownShexp), {m.dim, shared}, 0, 0.0f);
  }
  DUET_TRY(add(p + "shared_expert.gate_proj.weight", n::blk(b, n::kFfnGateShexp), {shared, m.dim}, 0, 0.0f));
  DUET_TRY(add(p + "shared_expert.up_proj.weight", n::blk(b, n::kFfnUpShexp), {shared, m.dim}, 0, 0.0f));
  DUET_TRY(add(p + "shared_expert.down_proj.weight", n::blk(b, n::kFfnDownShexp), {m.dim, shared}, 0, 0.0f));
  return add(p + "shared_expert_gate.weight", n::blk(b, n::kFfnRouterShexp), {1, m.dim}, 0, 0.0f);
}

Status HfCheckpoint::add_computed(std::string name, std::vector<float> values) {
  if (static_cast<int32_t>(values.size()) * 2 != config_.model.rope_dim)
    return err(dir_, ": ", name, " has ", values.size(), " values; RoPE rotates ", config_.model.rope_dim, " dims");
  computed_.emplace_back(name, std::move(values));
  plans_.push_back({std::move(name), nullptr, 0, 0.0f, nullptr, "", -1});
  return {};
}

Status HfCheckpoint::set_metadata() {
  const HfConfig& c = config_;
  GgufWriter w;
  const std::string name = fs::path(dir_).lexically_normal().filename().string();
  ModelConfig named = c.model;
  named.name = name.empty() ? "model" : name;
  write_model_config(w, named);

  const fs::path spm = fs::path(dir_) / "tokenizer.model";
  const fs::path json = fs::path(dir_) / "tokenizer.json";
  const fs::path tok_config = fs::path(dir_) / "tokenizer_config.json";
  if (fs::exists(spm)) {
    DUET_ASSIGN(const SpmModel m, read_spm_model(spm.string()));
    DUET_ASSIGN(const LlamaVocab v, vocab_from_spm(m, spm.string()));
    const GgufWriter vocab = vocab_only_gguf(v, name);
    for (const auto& [key, value] : vocab.metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  } else if (fs::exists(json)) {
    HfTokenizerFiles files{json.string(), fs::exists(tok_config) ? tok_config.string() : "",
                           c.bos_token_id, c.eos_token_id};
    DUET_TRY(set_hf_tokenizer_metadata(w, files));
  } else {
    return err(dir_, ": no tokenizer.model or tokenizer.json");
  }
  const GgufValue* tokens = nullptr;
  for (const auto& [key, value] : w.metadata())
    if (key == n::kTokTokens) tokens = &value;
  if (tokens && static_cast<int64_t>(tokens->items.size()) > c.model.n_vocab)
    return err(dir_, ": the tokenizer has ", tokens->items.size(),
               " tokens but config.json's vocab_size is ", c.model.n_vocab);
  metadata_ = w.metadata();
  return {};
}

Result<TensorView> HfCheckpoint::tensor(size_t i, std::optional<DType> dtype,
                                        std::vector<uint8_t>& buffer) const {
  const Plan& p = plans_[i];
  if (p.quant) return quantized_tensor(p, dtype, buffer);
  TensorView v;
  v.name = p.name;
  if (!p.source) {  // computed: F32 [rope_dim/2]
    const std::vector<float>* values = nullptr;
    for (const auto& [name, vec] : computed_)
      if (name == p.name) values = &vec;
    v.dtype = DType::F32;
    v.n_dims = 1;
    v.ne[0] = static_cast<int64_t>(values->size());
    v.data = values->data();
    v.nbytes = values->size() * sizeof(float);
    return v;
  }
  const SafetensorsTensor& s = *p.source;
  const bool is_vector = s.shape.size() == 1;
  v.dtype = is_vector ? DType::F32 : dtype.value_or(s.dtype);
  v.n_dims = static_cast<int>(s.shape.size());
  for (size_t d = 0; d < s.shape.size(); ++d) v.ne[d] = s.shape[s.shape.size() - 1 - d];
  const size_t elem = static_cast<size_t>(traits(v.dtype).block_bytes);
  v.nbytes = static_cast<size_t>(s.elements()) * elem;
  const bool aligned = reinterpret_cast<uintptr_t>(s.data) % elem == 0;
  if (p.permute_heads == 0 && p.add == 0.0f && v.dtype == s.dtype && aligned) {
    v.data = s.data;
    return v;
  }
  buffer.resize(v.nbytes);
  const int64_t rows = s.shape[0];
  const int64_t row_len = s.elements() / (rows ? rows : 1);
  const size_t src_row = static_cast<size_t>(row_len * traits(s.dtype).block_bytes);
  const size_t dst_row = static_cast<size_t>(row_len) * elem;
  const int64_t hd = p.permute_heads > 0 ? rows / p.permute_heads : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t from = hd > 0 ? hf_row(r, hd) : r;
    copy_elems(s.data + static_cast<size_t>(from) * src_row, s.dtype,
               buffer.data() + static_cast<size_t>(r) * dst_row, v.dtype, row_len);
  }
  if (p.add != 0.0f) {  // vectors only, F32
    auto* f = reinterpret_cast<float*>(buffer.data());
    for (int64_t i = 0; i < s.elements(); ++i) f[i] += p.add;
  }
  v.data = buffer.data();
  return v;
}

// A quantized layer in `dtype` when one is asked for (the float types:
// dequantized), else in its native layout; always a fresh buffer.
Result<TensorView> HfCheckpoint::quantized_tensor(const Plan& p, std::optional<DType> dtype,
                                                  std::vector<uint8_t>& buffer) const {
  const QuantizedLinear& q = *p.quant;
  TensorView v;
  v.name = p.name;
  v.dtype = dtype.value_or(q.native());
  v.n_dims = 2;
  v.ne[0] = q.in();
  v.ne[1] = q.out();
  DUET_ASSIGN(const size_t row, row_bytes(v.dtype, q.in()));
  v.nbytes = row * static_cast<size_t>(q.out());
  buffer.resize(v.nbytes);
  const int64_t hd = p.permute_heads > 0 ? q.out() / p.permute_heads : 0;
  DUET_TRY(q.write(v.dtype, [hd](int64_t r) { return hd > 0 ? hf_row(r, hd) : r; }, buffer.data()));
  v.data = buffer.data();
  return v;
}

Result<GgufWriter> hf_to_gguf(const HfCheckpoint& ck, std::optional<DType> dtype, const ProgressFn& progress) {
  GgufWriter w;
  for (const auto& [key, value] : ck.metadata()) w.set(key, value);
  if (dtype) {
    DUET_ASSIGN(const uint32_t file_type, llama_file_type(*dtype));
    w.set(n::kFileType, GgufValue::of_u32(file_type));
  }
  std::vector<uint8_t> buffer, stack;
  for (size_t i = 0; i < ck.n_tensors(); ++i) {
    if (progress) progress(i, ck.n_tensors());
    DUET_ASSIGN(const TensorView t, ck.tensor(i, dtype, buffer));
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    const auto [stacked, expert] = ck.expert_of(i);
    if (stacked.empty()) {
      DUET_TRY(w.add_tensor(t.name, t.dtype, std::move(ne), t.data, t.nbytes));
      continue;
    }
    // GGUF stacks a layer's experts as one [cols, rows, n_experts] tensor.
    if (expert == 0) stack.clear();
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    stack.insert(stack.end(), bytes, bytes + t.nbytes);
    if (expert + 1 == ck.config().model.n_experts) {
      ne.push_back(expert + 1);
      DUET_TRY(w.add_tensor(stacked, t.dtype, std::move(ne), stack.data(), stack.size()));
    }
  }
  if (progress) progress(ck.n_tensors(), ck.n_tensors());
  return w;
}

Result<GgufFile> hf_as_gguf(std::shared_ptr<const HfCheckpoint> ck) {
  // Owns the checkpoint (the mappings) and the rearranged copies.
  struct Backing {
    std::shared_ptr<const HfCheckpoint> ck;
    std::deque<std::vector<uint8_t>> buffers;
  };
  auto backing = std::make_shared<Backing>();
  backing->ck = ck;
  std::vector<TensorView> views;
  for (size_t i = 0; i < ck->n_tensors(); ++i) {
    std::vector<uint8_t>& buf = backing->buffers.emplace_back();
    DUET_ASSIGN(TensorView t, ck->tensor(i, std::nullopt, buf));
    if (buf.empty()) backing->buffers.pop_back();
    views.push_back(std::move(t));
  }
  return GgufFile::assemble(ck->dir(), ck->metadata(), std::move(views), std::move(backing));
}

}  // namespace duet
