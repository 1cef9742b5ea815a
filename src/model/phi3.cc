// Phi-3 / Phi-3.5 / Phi-4-mini: q, k and v in one fused matrix (attn_qkv)
// and the FFN's gate and up in another (ffn_up: the gate's rows first).
// GGUF rows are contiguous, so each part is a view of its rows and the
// shared code runs them as separate projections; nothing is copied.
#include "formats/llama_names.h"
#include "model/architectures.h"

namespace duet {

namespace n = gguf_names;

Status bind_phi3_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_ASSIGN(w.attn_norm, b.vector(n::blk(l, n::kAttnNorm), c.dim));
  DUET_ASSIGN(const TensorView* qkv, b.matrix(n::blk(l, n::kAttnQkv), c.dim, c.q_dim() + 2 * c.kv_dim()));
  w.wq = b.rows(*qkv, 0, c.q_dim());
  w.wk = b.rows(*qkv, c.q_dim(), c.kv_dim());
  w.wv = b.rows(*qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
  DUET_ASSIGN(w.wo, b.matrix(n::blk(l, n::kAttnOut), c.q_dim(), c.dim));
  DUET_ASSIGN(w.ffn_norm, b.vector(n::blk(l, n::kFfnNorm), c.dim));
  DUET_ASSIGN(const TensorView* gate_up, b.matrix(n::blk(l, n::kFfnUp), c.dim, 2 * int64_t{c.ffn_dim}));
  w.w_gate = b.rows(*gate_up, 0, c.ffn_dim);
  w.w_up = b.rows(*gate_up, c.ffn_dim, c.ffn_dim);
  DUET_ASSIGN(w.w_down, b.matrix(n::blk(l, n::kFfnDown), c.ffn_dim, c.dim));
  return {};
}

}  // namespace duet
