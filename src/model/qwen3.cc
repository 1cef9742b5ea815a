// Qwen3 (dense): Llama's layer without biases, plus an RMSNorm over each
// head of q and of k before RoPE; head_dim comes from the config
// (key_length), not dim / heads.
#include "formats/llama_names.h"
#include "model/architectures.h"

namespace duet {

namespace n = gguf_names;

Status bind_qwen3_layer(WeightBinder& b, const ModelConfig& c, int l, LayerWeights& w) {
  DUET_TRY(bind_llama_layer(b, c, l, w));
  if (w.bq) return err(c.arch, ": layer ", l, " has attention biases, which Qwen3 does not");
  DUET_ASSIGN(w.q_norm, b.vector(n::blk(l, n::kAttnQNorm), c.head_dim));
  DUET_ASSIGN(w.k_norm, b.vector(n::blk(l, n::kAttnKNorm), c.head_dim));
  return {};
}

}  // namespace duet
