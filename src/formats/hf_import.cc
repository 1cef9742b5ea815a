#include "formats/hf_import.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <set>

#include "core/half.h"
#include "formats/arch/arch.h"
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

  const float norm_plus = arch_traits(m.arch).hf_norm_plus_one ? 1.0f : 0.0f;
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

// One layer's tensors as its architecture's record lists them: HF's names,
// GGUF's as llama.cpp's converter gives them; each expert's matrices
// consecutive, so convert can stack them as GGUF's ffn_*_exps.
Status HfCheckpoint::plan_layer(
    int64_t l, const std::function<Status(const std::string&, std::string, std::vector<int64_t>, int32_t, float)>& add) {
  const ModelConfig& m = config_.model;
  const std::string p = layer_prefix(l);
  const int b = static_cast<int>(l);
  for (const LayerTensor& t : arch_record(m.arch).layer_tensors(m, b)) {
    const std::vector<int64_t> shape = t.is_vector() ? std::vector<int64_t>{t.out} : std::vector<int64_t>{t.out, t.in};
    if (t.n_experts == 0) {
      DUET_TRY(add(p + t.hf, t.bias ? n::blk_bias(b, t.gguf) : n::blk(b, t.gguf), shape, t.permute_heads, t.hf_add));
      continue;
    }
    for (int e = 0; e < t.n_experts; ++e) {
      DUET_TRY(add(p + t.hf_experts + std::to_string(e) + "." + t.hf, n::blk_expert(b, t.gguf_expert, e), shape, 0,
                   0.0f));
      plans_.back().stacked = n::blk(b, t.gguf);
      plans_.back().expert = e;
    }
  }
  return {};
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
