// Gemma 2 and 3: Llama's projections, with RMSNorms after attention and
// after the FFN as well as before them, and (Gemma 3) per-head q/k norms.
// GGUF stores Gemma's norm weights as 1 + w (the HF import adds the 1), so
// the shared RMSNorm applies them unchanged. The rest of Gemma (embedding
// scale, GeGLU, soft-caps, alternating windows) is configuration.
#include "formats/llama_names.h"
#include "model/architectures.h"

namespace duet {

namespace n = gguf_names;

Status bind_gemma_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_TRY(bind_llama_layer(b, c, l, w));
  if (w.bq) return err(c.arch, ": layer ", l, " has attention biases, which Gemma does not");
  DUET_ASSIGN(w.post_attn_norm, b.vector(n::blk(l, n::kPostAttnNorm), c.dim));
  DUET_ASSIGN(w.post_ffn_norm, b.vector(n::blk(l, n::kPostFfnNorm), c.dim));
  if (c.arch == "gemma3") {
    DUET_ASSIGN(w.q_norm, b.vector(n::blk(l, n::kAttnQNorm), c.head_dim));
    DUET_ASSIGN(w.k_norm, b.vector(n::blk(l, n::kAttnKNorm), c.head_dim));
  }
  return {};
}

}  // namespace duet
