// DeepSeek-V2 (and V2-Lite): multi-head latent attention, whose KV cache
// holds one latent row per token (model/decoder.cc attends over it), and a
// mixture of experts with shared experts after the first
// leading_dense_block_count layers, which stay dense.
#include "formats/llama_names.h"
#include "model/architectures.h"
#include "model/moe.h"

namespace duet {

namespace n = gguf_names;

Status bind_deepseek2_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  if (!c.mla()) return err(c.arch, ": attention.kv_lora_rank is missing (multi-head latent attention needs it)");
  const int64_t q_out = int64_t{c.n_heads} * c.head_dim;
  DUET_ASSIGN(w.attn_norm, b.vector(n::blk(l, n::kAttnNorm), c.dim));
  if (c.q_lora_rank > 0) {
    DUET_ASSIGN(w.wq_a, b.matrix(n::blk(l, n::kAttnQA), c.dim, c.q_lora_rank));
    DUET_ASSIGN(w.q_a_norm, b.vector(n::blk(l, n::kAttnQANorm), c.q_lora_rank));
    DUET_ASSIGN(w.wq, b.matrix(n::blk(l, n::kAttnQB), c.q_lora_rank, q_out));
  } else {
    DUET_ASSIGN(w.wq, b.matrix(n::blk(l, n::kAttnQ), c.dim, q_out));
  }
  DUET_ASSIGN(w.wkv_a, b.matrix(n::blk(l, n::kAttnKvA), c.dim, c.latent_dim()));
  DUET_ASSIGN(w.kv_a_norm, b.vector(n::blk(l, n::kAttnKvANorm), c.kv_lora_rank));
  DUET_ASSIGN(w.wkv_b, b.matrix(n::blk(l, n::kAttnKvB), c.kv_lora_rank,
                                int64_t{c.n_heads} * (c.nope_dim() + c.v_head_dim)));
  DUET_ASSIGN(w.wo, b.matrix(n::blk(l, n::kAttnOut), int64_t{c.n_heads} * c.v_head_dim, c.dim));
  DUET_ASSIGN(w.ffn_norm, b.vector(n::blk(l, n::kFfnNorm), c.dim));
  const bool dense = l < c.n_dense_leading || !c.moe();
  if (!dense) return bind_moe_ffn(b, c, l, w);
  if (b.has(n::blk(l, n::kFfnRouter)))
    return err(c.arch, ": layer ", l, " has a router (", n::blk(l, n::kFfnRouter), ") but is one of the ",
               c.n_dense_leading, " leading dense layers");
  DUET_ASSIGN(w.w_gate, b.matrix(n::blk(l, n::kFfnGate), c.dim, c.ffn_dim));
  DUET_ASSIGN(w.w_up, b.matrix(n::blk(l, n::kFfnUp), c.dim, c.ffn_dim));
  DUET_ASSIGN(w.w_down, b.matrix(n::blk(l, n::kFfnDown), c.ffn_dim, c.dim));
  return {};
}

}  // namespace duet
