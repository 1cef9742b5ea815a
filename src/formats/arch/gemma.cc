// Gemma 2 and 3: RMSNorms before and after attention and the FFN, GeGLU
// (GELU with the tanh approximation), embeddings scaled by sqrt(dim), the
// head tied to them, local (sliding) and global layers alternating; Gemma
// 2 soft-caps the scores and the logits, Gemma 3 norms each head of q and k
// and gives its local layers their own RoPE base. Hugging Face stores the
// norms' weights as w where GGUF (llama.cpp's converter) stores 1 + w.
#include <cmath>

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

// Every period-th layer attends globally: 2 for Gemma 2, 6 for Gemma 3.
void set_gemma_fixed(ModelConfig& c) {
  const bool gemma2 = c.arch == Arch::kGemma2;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  c.swa_period = gemma2 ? 2 : 6;
  if (!gemma2) c.rope_base_local = 10000.0f;
}

// The query scale is GGUF's attention.scale when given; llama.cpp's
// converters omit it and the 27B models, whose query_pre_attn_scalar is
// dim / heads rather than head_dim, are told apart by depth as llama.cpp does.
Status read_gemma_gguf(const GgufFile& f, ModelConfig& c) {
  const auto key = [&](const std::string& s) { return n::key(c.arch_name(), s); };
  const bool gemma2 = c.arch == Arch::kGemma2;
  set_gemma_fixed(c);
  if (!f.has(key(n::kSlidingWindow)))
    return err(f.path(), ": ", key(n::kSlidingWindow), " is missing (", c.arch_name(),
               " alternates local and global layers)");
  if (gemma2) {
    DUET_ASSIGN(c.attn_softcap, gguf_read::positive_float_or(f, key(n::kAttnSoftcap), 50.0));
    DUET_ASSIGN(c.final_softcap, gguf_read::positive_float_or(f, key(n::kFinalSoftcap), 30.0));
  }
  const bool is_27b = c.n_layers == (gemma2 ? 46 : 62);
  const float fallback = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.dim / c.n_heads : c.head_dim));
  DUET_ASSIGN(c.query_scale, gguf_read::positive_float_or(f, key(n::kAttnScale), fallback));
  return {};
}

using namespace hf_json;

// A soft-cap key: its class default unless given; null turns it off.
Status read_softcap(const json& j, const char* key, const std::string& src, float fallback, float* out) {
  *out = fallback;
  const auto it = j.find(key);
  if (it != j.end() && it->is_null()) *out = 0.0f;
  DUET_TRY(read_float(j, key, src, out));
  if (!(*out >= 0.0f)) return err(src, ": \"", key, "\" must not be negative");
  return {};
}

// head_dim 256 unless given; the window 4096 unless given; Gemma 3's
// pattern and local base as duet runs them; the query scale from
// query_pre_attn_scalar.
Status read_gemma_hf(const json& j, const std::string& src, HfConfig& hc) {
  ModelConfig& m = hc.model;
  const bool gemma2 = m.arch == Arch::kGemma2;
  const json* act = field(j, "hidden_activation");
  if (!act) act = field(j, "hidden_act");
  if (act && *act != "gelu_pytorch_tanh" && *act != "gelu")
    return err(src, ": hidden_activation ", act->dump(), " is not supported (gelu_pytorch_tanh)");
  if (!field(j, "head_dim")) m.head_dim = m.rope_dim = 256;
  set_gemma_fixed(m);
  m.sliding_window = 4096;
  DUET_TRY(read_int(j, "sliding_window", src, 1, 1 << 24, &m.sliding_window));
  if (!gemma2) {
    int32_t pattern = 6;
    DUET_TRY(read_int(j, "sliding_window_pattern", src, 1, 4096, &pattern));
    double local_base = 10000.0;
    DUET_TRY(read_float(j, "rope_local_base_freq", src, &local_base));
    if (pattern != 6 || local_base != 10000.0)
      return err(src, ": Gemma 3 with sliding_window_pattern ", pattern, " and rope_local_base_freq ", local_base,
                 " is not supported (6 and 10000)");
  }
  DUET_TRY(read_softcap(j, "attn_logit_softcapping", src, gemma2 ? 50.0f : 0.0f, &m.attn_softcap));
  DUET_TRY(read_softcap(j, "final_logit_softcapping", src, gemma2 ? 30.0f : 0.0f, &m.final_softcap));
  double scalar = 256.0;
  DUET_TRY(read_float(j, "query_pre_attn_scalar", src, &scalar));
  if (!(scalar > 0.0)) return err(src, ": query_pre_attn_scalar must be positive");
  m.query_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  return {};
}

Status check_gemma_shape(const ModelConfig& c) {
  if (!c.tied_output) return err("synth: Gemma's head is always tied");
  return {};
}

std::vector<LayerTensor> gemma_layer(const ModelConfig& c, int layer) { return standard_layer(c, layer); }

ArchRecord gemma(Arch a, const char* gguf, const char* hf, QkNorm qk) {
  ArchTraits t;
  t.norms = NormPlacement::kPreAndPost;
  t.qk_norm = qk;
  t.ffn_act = FfnActivation::kGeluTanh;
  t.hf_norm_plus_one = true;
  t.hf_tied = true;
  return {.arch = a,
          .gguf_name = gguf,
          .hf_classes = {{hf, read_gemma_hf}},
          .traits = t,
          .read_gguf = read_gemma_gguf,
          .check_shape = check_gemma_shape,
          .layer_tensors = gemma_layer};
}

}  // namespace

ArchRecord gemma2_record() { return gemma(Arch::kGemma2, "gemma2", "Gemma2ForCausalLM", QkNorm::kNone); }
ArchRecord gemma3_record() { return gemma(Arch::kGemma3, "gemma3", "Gemma3ForCausalLM", QkNorm::kPerHead); }

}  // namespace duet
