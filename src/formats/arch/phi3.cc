// Phi-3 / Phi-3.5 / Phi-4-mini: q, k and v in one fused matrix (attn_qkv)
// and the FFN's gate and up in another (ffn_up, the gate's rows first);
// the binding takes each part as a view of its rows. RoPE over a leading
// part of each head (partial_rotary_factor), LongRoPE's short and long
// factors for long contexts (rope_factors_*), optionally a sliding window.
#include "formats/arch/arch.h"
#include "formats/arch/layer_builder.h"
#include "formats/hf_config.h"
#include "formats/hf_json.h"

namespace duet {
namespace {

using namespace hf_json;

Status read_phi3_hf(const json& j, const std::string& src, HfConfig& c) {
  ModelConfig& m = c.model;
  double partial = 1.0;
  DUET_TRY(read_float(j, "partial_rotary_factor", src, &partial));
  // Checked before the product is made an int: a huge factor overflowed it.
  if (!(partial > 0.0 && partial <= 1.0)) return err(src, ": partial_rotary_factor ", partial, " must be in (0, 1]");
  m.rope_dim = static_cast<int32_t>(m.head_dim * partial);
  if (m.rope_dim % 2 != 0)
    return err(src, ": partial_rotary_factor ", partial, " must give an even number of rotated dims");
  return read_int(j, "sliding_window", src, 1, 1 << 24, &m.sliding_window);
}

std::vector<LayerTensor> phi3_layer(const ModelConfig& c, int layer) { return standard_layer(c, layer); }

}  // namespace

ArchRecord phi3_record() {
  ArchTraits t;
  t.fused_projections = true;
  return {.arch = Arch::kPhi3, .gguf_name = "phi3", .hf_classes = {{"Phi3ForCausalLM", read_phi3_hf}},
          .traits = t, .layer_tensors = phi3_layer};
}

}  // namespace duet
