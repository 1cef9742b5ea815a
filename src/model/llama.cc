// Llama 2/3, Mistral and Qwen2: separate q/k/v and gate/up projections;
// Qwen2 adds Q/K/V biases. A layer with a router (Mixtral, and the
// Qwen3-MoE layers through qwen3.cc) has a mixture of experts as its FFN.
#include "formats/llama_names.h"
#include "model/architectures.h"
#include "model/moe.h"

namespace duet {

namespace n = gguf_names;

Status bind_llama_projections(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_ASSIGN(w.wq, b.matrix(n::blk(l, n::kAttnQ), c.dim, c.q_dim()));
  DUET_ASSIGN(w.wk, b.matrix(n::blk(l, n::kAttnK), c.dim, c.kv_dim()));
  DUET_ASSIGN(w.wv, b.matrix(n::blk(l, n::kAttnV), c.dim, c.kv_dim()));
  DUET_ASSIGN(w.wo, b.matrix(n::blk(l, n::kAttnOut), c.q_dim(), c.dim));
  if (b.has(n::blk(l, n::kFfnRouter))) {
    DUET_TRY(bind_moe_ffn(b, c, l, w));
  } else {
    DUET_ASSIGN(w.w_gate, b.matrix(n::blk(l, n::kFfnGate), c.dim, c.ffn_dim));
    DUET_ASSIGN(w.w_up, b.matrix(n::blk(l, n::kFfnUp), c.dim, c.ffn_dim));
    DUET_ASSIGN(w.w_down, b.matrix(n::blk(l, n::kFfnDown), c.ffn_dim, c.dim));
  }
  if (b.has(n::blk_bias(l, n::kAttnQ))) {
    DUET_ASSIGN(w.bq, b.vector(n::blk_bias(l, n::kAttnQ), c.q_dim()));
    DUET_ASSIGN(w.bk, b.vector(n::blk_bias(l, n::kAttnK), c.kv_dim()));
    DUET_ASSIGN(w.bv, b.vector(n::blk_bias(l, n::kAttnV), c.kv_dim()));
  }
  return {};
}

Status bind_llama_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_ASSIGN(w.attn_norm, b.vector(n::blk(l, n::kAttnNorm), c.dim));
  DUET_ASSIGN(w.ffn_norm, b.vector(n::blk(l, n::kFfnNorm), c.dim));
  return bind_llama_projections(b, c, l, w);
}

}  // namespace duet
