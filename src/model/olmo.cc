// The OLMo family, whose q and k norms run over all heads of a row at once
// (ModelConfig::qk_norm_spans_heads) before RoPE, on Llama's projections
// without biases:
//   OLMoE: Llama's pre-norm layer with a mixture of experts in every FFN;
//   OLMo 2: no norm before attention or the FFN, one after each (their
//   outputs normed, then added to the residual).
#include "formats/llama_names.h"
#include "model/architectures.h"

namespace duet {

namespace n = gguf_names;

namespace {

Status bind_wide_qk_norms(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  if (w.bq) return err(c.arch, ": layer ", l, " has attention biases, which OLMo does not");
  DUET_ASSIGN(w.q_norm, b.vector(n::blk(l, n::kAttnQNorm), c.q_dim()));
  DUET_ASSIGN(w.k_norm, b.vector(n::blk(l, n::kAttnKNorm), c.kv_dim()));
  return {};
}

}  // namespace

Status bind_olmoe_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_TRY(bind_llama_layer(b, c, l, w));
  if (!w.router)
    return err(c.arch, ": layer ", l, " has no router (", n::blk(l, n::kFfnRouter),
               "); every OLMoE layer is a mixture of experts");
  return bind_wide_qk_norms(b, c, l, w);
}

Status bind_olmo2_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_TRY(bind_llama_projections(b, c, l, w));
  if (w.router) return err(c.arch, ": layer ", l, " has a router; OLMo 2 is dense");
  DUET_ASSIGN(w.post_attn_norm, b.vector(n::blk(l, n::kPostAttnNorm), c.dim));
  DUET_ASSIGN(w.post_ffn_norm, b.vector(n::blk(l, n::kPostFfnNorm), c.dim));
  return bind_wide_qk_norms(b, c, l, w);
}

}  // namespace duet
