#include "formats/llama_synth.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "formats/arch/arch.h"
#include "formats/file_type.h"
#include "formats/gguf.h"
#include "formats/llama_import.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

namespace names = gguf_names;

// Counter-based splitmix64: fast, and each tensor gets its own stream from
// (seed, name), so a tensor's values do not depend on which tensors precede it.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Approximately N(0, 1): the sum of four 16-bit uniforms (Irwin-Hall),
  // rescaled to unit variance. Bounded by +-3.46, which random weights
  // welcome, and one 64-bit draw per value instead of a log and a cosine.
  float normal() {
    const uint64_t r = next();
    const int64_t sum = static_cast<int64_t>(r & 0xffff) + static_cast<int64_t>((r >> 16) & 0xffff) +
                        static_cast<int64_t>((r >> 32) & 0xffff) + static_cast<int64_t>(r >> 48);
    return static_cast<float>(sum - 131070) * (1.7320508f / 65536.0f);
  }

 private:
  uint64_t state_;
};

uint64_t stream_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  Rng mix(seed ^ h);
  return mix.next();
}

// Draws ne[0]*ne[1] values of mean `mean` and deviation `stddev` straight
// into the target dtype, so an F16 tensor never has an F32 twin in memory.
Status add_random(GgufWriter& w, const std::string& name, DType dtype,
                  std::vector<int64_t> ne, float mean, float stddev, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  Rng rng(stream_seed(seed, name));
  if (dtype == DType::F32) {
    std::vector<float> v(static_cast<size_t>(n));  // ne
    for (float& x : v) x = mean + stddev * rng.normal();
    return w.add_tensor(name, dtype, std::move(ne), v.data(), v.size() * sizeof(float));
  }
  std::vector<uint16_t> v(static_cast<size_t>(n));  // ne
  if (dtype == DType::F16) {
    for (uint16_t& x : v) x = f32_to_f16(mean + stddev * rng.normal());
  } else if (dtype == DType::BF16) {
    for (uint16_t& x : v) x = f32_to_bf16(mean + stddev * rng.normal());
  } else {
    return err("synth: dtype ", dtype_name(dtype), " is not supported (f32, f16, bf16)");
  }
  return w.add_tensor(name, dtype, std::move(ne), v.data(), v.size() * sizeof(uint16_t));
}

// A SentencePiece-style vocabulary of exactly n tokens: <unk> <s> </s>, the
// 256 byte fallbacks, then pieces in order of decreasing score: "▁", each
// printable ASCII character bare and after "▁", then lowercase strings of
// length 2, 3, ... bare and after "▁". Every text tokenizes (bytes fall back).
LlamaVocab synthetic_vocab(int64_t n) {
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
  LlamaVocab v;  // <unk> 0, <s> 1, </s> 2 as its defaults say
  const auto add = [&](std::string piece, SpmPieceType type, float score) {
    v.tokens.push_back(std::move(piece));
    v.types.push_back(static_cast<int32_t>(type));
    v.scores.push_back(score);
  };
  add("<unk>", SpmPieceType::kUnknown, 0.0f);
  add("<s>", SpmPieceType::kControl, 0.0f);
  add("</s>", SpmPieceType::kControl, 0.0f);
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    add(hex, SpmPieceType::kByte, 0.0f);
  }
  std::vector<std::string> pieces = {space};
  for (char c = 0x21; c < 0x7f; ++c) pieces.emplace_back(1, c);
  for (char c = 0x21; c < 0x7f; ++c) pieces.push_back(space + c);
  for (int len = 2; static_cast<int64_t>(v.tokens.size() + pieces.size()) < n; ++len) {
    std::string s(static_cast<size_t>(len), 'a');
    for (bool more = true; more && static_cast<int64_t>(v.tokens.size() + pieces.size()) < n;) {
      pieces.push_back(s);
      pieces.push_back(space + s);
      int i = len - 1;  // odometer over a..z
      while (i >= 0 && s[static_cast<size_t>(i)] == 'z') s[static_cast<size_t>(i--)] = 'a';
      if (i < 0) more = false; else ++s[static_cast<size_t>(i)];
    }
  }
  for (size_t i = 0; static_cast<int64_t>(v.tokens.size()) < n; ++i)
    add(pieces[i], SpmPieceType::kNormal, -static_cast<float>(i));
  return v;
}

// Copies every tokenizer.* key of `path`; returns its vocabulary size.
Result<int64_t> copy_vocab(GgufWriter& w, const std::string& path) {
  DUET_ASSIGN(GgufFile src, GgufFile::open(path));
  const GgufValue* toks = src.find(names::kTokTokens);
  if (!toks || toks->type != GgufType::ARRAY || toks->items.empty())
    return err(path, ": no tokenizer (", names::kTokTokens, " missing or empty)");
  for (const std::string& key : src.keys())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, *src.find(key));
  return static_cast<int64_t>(toks->items.size());
}

// The tokenizer keys of the file: opt.vocab_from's, whose size then fixes
// s.n_vocab, or a synthetic vocabulary of s.n_vocab tokens.
Result<GgufWriter> vocab_keys(const SynthOptions& opt, ModelConfig& s) {
  GgufWriter v;
  if (!opt.vocab_from.empty()) {
    DUET_ASSIGN(int64_t n_vocab, copy_vocab(v, opt.vocab_from));
    if (s.n_vocab != 0 && s.n_vocab != n_vocab)
      return err("synth: --vocab-size ", s.n_vocab, " disagrees with the ", n_vocab,
                 " tokens of ", opt.vocab_from);
    s.n_vocab = static_cast<int32_t>(n_vocab);
  }
  DUET_TRY(validate_shape(s));
  if (opt.vocab_from.empty()) {
    constexpr int64_t kSpecialAndBytes = 3 + 256;
    if (s.n_vocab < kSpecialAndBytes + 1)
      return err("synth: a synthetic vocabulary needs vocab-size >= ", kSpecialAndBytes + 1,
                 " (3 special + 256 byte tokens + pieces), got ", s.n_vocab);
    set_llama_vocab(v, synthetic_vocab(s.n_vocab));
  }
  return v;
}

// One layer tensor of random values: a norm near 1, a matrix of deviation
// 1/sqrt(fan_in) (the residual projections smaller: `res_scale`), a router
// in F32 (llama-quantize leaves it so) that spreads tokens over the experts,
// a mixture's experts stacked [in, out, n] as llama.cpp's converters write them.
Status add_layer_tensor(GgufWriter& w, const LayerTensor& t, int l, DType dt, float res_scale, uint64_t seed) {
  constexpr float kNormNoise = 0.1f;
  const std::string name = t.bias ? names::blk_bias(l, t.gguf) : names::blk(l, t.gguf);
  if (t.is_vector()) return add_random(w, name, DType::F32, {t.out}, t.bias ? 0.0f : 1.0f, kNormNoise, seed);
  const float stddev = 1.0f / std::sqrt(static_cast<float>(t.in)) * (t.residual ? res_scale : 1.0f);
  std::vector<int64_t> ne = {t.in, t.out};
  if (t.n_experts > 0) ne.push_back(t.n_experts);
  return add_random(w, name, t.role == Role::kRouter ? DType::F32 : dt, std::move(ne), 0.0f, stddev, seed);
}

}  // namespace

constexpr const char* kPresets =
    "tinyllama-1.1b, stories110m, stories15m, qwen3-0.6b, gemma3-1b, gemma2-2b, phi4-mini, mixtral-8x7b, "
    "qwen3-30b-a3b, olmoe-1b-7b, olmo2-1b, deepseek-v2-lite";

Result<ModelConfig> model_preset(std::string_view name) {
  ModelConfig s;
  if (name == "tinyllama-1.1b") {
    s = {.n_vocab = 32000, .dim = 2048, .n_layers = 22, .n_heads = 32, .n_kv_heads = 4, .ffn_dim = 5632,
         .ctx_len = 2048};
  } else if (name == "stories110m") {
    s = {.n_vocab = 32000, .dim = 768, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12, .ffn_dim = 2048,
         .ctx_len = 1024, .tied_output = true};
  } else if (name == "stories15m") {
    s = {.n_vocab = 32000, .dim = 288, .n_layers = 6, .n_heads = 6, .n_kv_heads = 6, .ffn_dim = 768,
         .ctx_len = 256, .tied_output = true};
  } else if (name == "qwen3-0.6b") {
    s = {.arch = Arch::kQwen3, .n_vocab = 151936, .dim = 1024, .n_layers = 28, .n_heads = 16, .n_kv_heads = 8,
         .head_dim = 128, .ffn_dim = 3072, .ctx_len = 40960, .rope_base = 1e6f, .rms_eps = 1e-6f, .tied_output = true};
  } else if (name == "gemma3-1b") {
    s = {.arch = Arch::kGemma3, .n_vocab = 262144, .dim = 1152, .n_layers = 26, .n_heads = 4, .n_kv_heads = 1,
         .head_dim = 256, .ffn_dim = 6912, .ctx_len = 32768, .rope_base = 1e6f, .rms_eps = 1e-6f,
         .sliding_window = 512, .tied_output = true};
  } else if (name == "gemma2-2b") {
    s = {.arch = Arch::kGemma2, .n_vocab = 256000, .dim = 2304, .n_layers = 26, .n_heads = 8, .n_kv_heads = 4,
         .head_dim = 256, .ffn_dim = 9216, .ctx_len = 8192, .rms_eps = 1e-6f, .sliding_window = 4096,
         .tied_output = true, .attn_softcap = 50.0f, .final_softcap = 30.0f};
  } else if (name == "phi4-mini") {
    s = {.arch = Arch::kPhi3, .n_vocab = 200064, .dim = 3072, .n_layers = 32, .n_heads = 24, .n_kv_heads = 8,
         .head_dim = 128, .ffn_dim = 8192, .ctx_len = 4096, .rope_dim = 96, .tied_output = true};
  } else if (name == "mixtral-8x7b") {
    s = {.n_vocab = 32000, .dim = 4096, .n_layers = 32, .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 14336,
         .ctx_len = 32768, .rope_base = 1e6f, .n_experts = 8, .n_experts_used = 2, .expert_ffn_dim = 14336};
  } else if (name == "qwen3-30b-a3b") {
    s = {.arch = Arch::kQwen3Moe, .n_vocab = 151936, .dim = 2048, .n_layers = 48, .n_heads = 32, .n_kv_heads = 4,
         .head_dim = 128, .ffn_dim = 6144, .ctx_len = 40960, .rope_base = 1e6f, .rms_eps = 1e-6f,
         .n_experts = 128, .n_experts_used = 8, .expert_ffn_dim = 768};
  } else if (name == "olmoe-1b-7b") {
    s = {.arch = Arch::kOlmoe, .n_vocab = 50304, .dim = 2048, .n_layers = 16, .n_heads = 16, .n_kv_heads = 16,
         .ffn_dim = 1024, .ctx_len = 4096, .n_experts = 64, .n_experts_used = 8, .expert_ffn_dim = 1024,
         .expert_weights_norm = false};
  } else if (name == "olmo2-1b") {
    s = {.arch = Arch::kOlmo2, .n_vocab = 100352, .dim = 2048, .n_layers = 16, .n_heads = 16, .n_kv_heads = 16,
         .ffn_dim = 8192, .ctx_len = 4096, .rope_base = 500000.0f, .rms_eps = 1e-6f};
  } else if (name == "deepseek-v2-lite") {
    s = {.arch = Arch::kDeepseek2, .n_vocab = 102400, .dim = 2048, .n_layers = 27, .n_heads = 16, .n_kv_heads = 16,
         .head_dim = 192, .ffn_dim = 10944, .ctx_len = 163840, .rope_dim = 64, .rms_eps = 1e-6f,
         .n_experts = 64, .n_experts_used = 6, .expert_ffn_dim = 1408, .expert_weights_norm = false,
         .shared_expert_ffn_dim = 2 * 1408, .n_dense_leading = 1, .kv_lora_rank = 512, .v_head_dim = 128};
    s.yarn = {.factor = 40.0f, .orig_ctx = 4096, .log_mul = 0.0707f};  // its config's YaRN
  } else {
    return err("unknown model preset '", name, "' (", kPresets, ")");
  }
  s.name = "synth-" + std::string(name);
  return s;
}

Status validate_shape(const ModelConfig& s) {
  // Bounds keep every tensor's element count far from overflow and make a
  // typo fail here rather than as an allocation of terabytes.
  constexpr int64_t kMaxDim = 1 << 17, kMaxLayers = 1024, kMaxVocab = 1 << 22;
  auto in = [](const char* field, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v < lo || v > hi) return err("synth: ", field, " = ", v, " is outside [", lo, ", ", hi, "]");
    return {};
  };
  DUET_TRY(in("dim", s.dim, 1, kMaxDim));
  DUET_TRY(in("ffn", s.ffn_dim, 1, kMaxDim));
  DUET_TRY(in("layers", s.n_layers, 1, kMaxLayers));
  DUET_TRY(in("heads", s.n_heads, 1, s.dim));
  DUET_TRY(in("kv-heads", s.n_kv_heads, 1, s.n_heads));
  DUET_TRY(in("vocab-size", s.n_vocab, 1, kMaxVocab));
  DUET_TRY(in("ctx", s.ctx_len, 1, 1 << 24));
  if (s.n_heads % s.n_kv_heads != 0)
    return err("synth: heads (", s.n_heads, ") must be a multiple of kv-heads (", s.n_kv_heads, ")");
  if (s.head_dim == 0 && s.dim % s.n_heads != 0)
    return err("synth: dim (", s.dim, ") is not divisible by heads (", s.n_heads, "); give --head-dim");
  const int64_t hd = s.head_dim ? s.head_dim : s.dim / s.n_heads;
  DUET_TRY(in("head-dim", hd, 2, 4096));
  if (hd % 2 != 0) return err("synth: head-dim (", hd, ") must be even for RoPE");
  if (!(s.rope_base > 1.0) || !std::isfinite(s.rope_base))
    return err("synth: rope-base (", s.rope_base, ") must be a finite number > 1");
  if (!(s.rms_eps > 0.0) || !(s.rms_eps < 1.0))
    return err("synth: rms-eps (", s.rms_eps, ") must be in (0, 1)");
  const ArchRecord& record = arch_record(s.arch);
  if (record.traits.experts != Experts::kOptional && !s.moe())
    return err("synth: ", s.arch_name(), " needs --experts");
  if (s.moe()) {
    DUET_TRY(in("experts", s.n_experts, 1, 4096));
    DUET_TRY(in("experts-used", s.n_experts_used, 1, s.n_experts));
    DUET_TRY(in("expert-ffn", s.expert_ffn_dim, 1, kMaxDim));
    if (record.traits.fused_projections || record.traits.norms != NormPlacement::kPre)
      return err("synth: ", s.arch_name(), " has no mixture of experts");
  }
  if (record.check_shape) DUET_TRY(record.check_shape(s));
  return {};
}

Status synth_model(const SynthOptions& opt, const std::string& out_path) {
  if (opt.dtype != DType::F32 && opt.dtype != DType::F16 && opt.dtype != DType::BF16)
    return err("synth: dtype ", dtype_name(opt.dtype), " is not supported (f32, f16, bf16)");
  ModelConfig s = opt.shape;
  if (s.moe() && s.expert_ffn_dim == 0) s.expert_ffn_dim = s.ffn_dim;  // Mixtral's experts are its FFN
  DUET_ASSIGN(const GgufWriter vocab, vocab_keys(opt, s));
  if (s.head_dim == 0) s.head_dim = s.dim / s.n_heads;
  if (!arch_traits(s.arch).latent_attention && (s.rope_dim == 0 || s.rope_dim > s.head_dim)) s.rope_dim = s.head_dim;
  GgufWriter w;
  write_model_config(w, s);
  DUET_ASSIGN(const uint32_t file_type, llama_file_type(opt.dtype));
  w.set(names::kFileType, GgufValue::of_u32(file_type));
  for (const auto& [key, value] : vocab.metadata()) w.set(key, value);

  // Scales keep activations O(1) through any depth: after each RMSNorm a
  // matrix of deviation 1/sqrt(fan_in) maps unit-RMS inputs to unit-RMS
  // outputs (so attention scores are ~N(0,1): neither uniform nor one-hot);
  // the two projections that add into the residual are further divided by
  // sqrt(2*layers) so the stream grows by O(1) over the whole stack.
  const float res_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layers));
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  const DType dt = opt.dtype;
  const uint64_t seed = opt.seed;
  constexpr float kNormNoise = 0.1f;

  // A tied head reads logits off the embedding, so there the embedding gets
  // the head's 1/sqrt(dim) (logits ~N(0,1), as untied); at N(0,1) the logits
  // would spread by sqrt(dim) and greedy decoding would echo its input.
  // Gemma multiplies embeddings by sqrt(dim) itself.
  const float embd_std = s.tied_output ? inv_sqrt(s.dim) : 1.0f;
  DUET_TRY(add_random(w, names::kTokenEmbd, dt, {s.dim, s.n_vocab}, 0.0f, embd_std, seed));
  for (int l = 0; l < s.n_layers; ++l)
    for (const LayerTensor& t : arch_record(s.arch).layer_tensors(s, l))
      DUET_TRY(add_layer_tensor(w, t, l, dt, res_scale, seed));
  DUET_TRY(add_random(w, names::kOutputNorm, DType::F32, {s.dim}, 1.0f, kNormNoise, seed));
  if (!s.tied_output)
    DUET_TRY(add_random(w, names::kOutput, dt, {s.dim, s.n_vocab}, 0.0f, inv_sqrt(s.dim), seed));
  return w.write(out_path);
}

}  // namespace duet
