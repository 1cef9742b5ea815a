// OLMoE: Llama's layer with a mixture of experts in every FFN, no biases,
// and an RMSNorm over the whole of q and of k (all heads of a row at once,
// ModelConfig::qk_norm_spans_heads) before RoPE.
#include "formats/llama_names.h"
#include "model/architectures.h"

namespace duet {

namespace n = gguf_names;

Status bind_olmoe_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_TRY(bind_llama_layer(b, c, l, w));
  if (w.bq) return err(c.arch, ": layer ", l, " has attention biases, which OLMoE does not");
  if (!w.router) return err(c.arch, ": layer ", l, " has no router (", n::blk(l, n::kFfnRouter), "); every OLMoE layer is a mixture of experts");
  DUET_ASSIGN(w.q_norm, b.vector(n::blk(l, n::kAttnQNorm), c.q_dim()));
  DUET_ASSIGN(w.k_norm, b.vector(n::blk(l, n::kAttnKNorm), c.kv_dim()));
  return {};
}

}  // namespace duet
