// The decoder every supported architecture shares: pre-norm blocks of
// RMSNorm → GQA attention with RoPE → residual → RMSNorm → gated FFN →
// residual, with the variations ModelConfig names (q/k norms, post-norms,
// GeGLU, soft-caps, per-layer sliding windows and RoPE bases). What differs
// per architecture is which tensors a layer has and how they are named or
// fused: each architecture's LayerBinder (model/architectures.h) says that.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"

namespace duet {

// One FFN matrix of a mixture of experts: each expert's as a matrix of its
// own, and `stacked` (every expert's rows as one matrix) where the file
// stacks them, so packing copies it once and the experts become views of
// the copy.
struct ExpertMatrices {
  const TensorView* stacked = nullptr;
  std::vector<const TensorView*> experts;
};

// A layer's tensors; null where the architecture has none.
struct LayerWeights {
  const TensorView* attn_norm = nullptr;  // [dim] f32
  const TensorView* wq = nullptr;         // [q_dim rows][dim]
  const TensorView* wk = nullptr;         // [kv_dim rows][dim]
  const TensorView* wv = nullptr;         // [kv_dim rows][dim]
  const TensorView* wo = nullptr;         // [dim rows][q_dim]
  const TensorView* ffn_norm = nullptr;   // [dim] f32
  const TensorView* w_gate = nullptr;     // [ffn rows][dim]
  const TensorView* w_up = nullptr;       // [ffn rows][dim]
  const TensorView* w_down = nullptr;     // [dim rows][ffn]
  const TensorView* bq = nullptr;         // Q/K/V biases [q_dim], [kv_dim], [kv_dim] (Qwen2)
  const TensorView* bk = nullptr;
  const TensorView* bv = nullptr;
  const TensorView* q_norm = nullptr;     // per-head norms [head_dim] (Qwen3, Gemma 3)
  const TensorView* k_norm = nullptr;
  const TensorView* post_attn_norm = nullptr;  // [dim] (Gemma 2/3)
  const TensorView* post_ffn_norm = nullptr;
  // A mixture-of-experts FFN instead of w_gate/w_up/w_down (model/moe.h).
  const TensorView* router = nullptr;     // [n_experts rows][dim]
  ExpertMatrices exp_gate, exp_up;        // each expert [expert_ffn rows][dim]
  ExpertMatrices exp_down;                // each expert [dim rows][expert_ffn]
  // A shared expert beside the routed ones (Qwen2-MoE), with its gate's
  // weights as a one-row matrix [1 row][dim] (null: not gated).
  const TensorView* shared_gate = nullptr;  // [shared_ffn rows][dim]
  const TensorView* shared_up = nullptr;
  const TensorView* shared_down = nullptr;  // [dim rows][shared_ffn]
  const TensorView* shared_router = nullptr;
  // Multi-head latent attention (DeepSeek-V2): wq is the per-head query
  // [nope | rope] (after wq_a and q_a_norm where q has a bottleneck);
  // wkv_a gives the latent [kv_lora | rope], kv_a_norm normalises its
  // kv_lora part, wkv_b decompresses it per head into [nope key | value].
  const TensorView* wq_a = nullptr;       // [q_lora rows][dim]
  const TensorView* q_a_norm = nullptr;   // [q_lora]
  const TensorView* wkv_a = nullptr;      // [kv_lora + rope rows][dim]
  const TensorView* kv_a_norm = nullptr;  // [kv_lora]
  const TensorView* wkv_b = nullptr;      // [heads * (nope + v) rows][kv_lora]
};

// Finds a file's tensors by name with the shape the config implies, or a
// clear error naming the tensor.
class WeightBinder {
 public:
  WeightBinder(const GgufFile& file, std::deque<TensorView>& slices) : file_(file), slices_(slices) {}

  bool has(const std::string& name) const { return file_.tensor(name) != nullptr; }
  // A matrix of `out` rows of `in` elements, in a type duet computes with.
  Result<const TensorView*> matrix(const std::string& name, int64_t in, int64_t out) const;
  // An F32 vector of n elements.
  Result<const TensorView*> vector(const std::string& name, int64_t n) const;
  // Rows [first, first + count) of a bound matrix as a matrix of their own:
  // how fused projections (Phi-3's qkv) become the shared code's q, k and v.
  // Of a packed matrix, only whole 16-row groups.
  const TensorView* rows(const TensorView& m, int64_t first, int64_t count);
  // n experts' matrices of `out` rows of `in` elements: the stacked tensor
  // blk.L.<stacked>.weight [in, out, n], or else one blk.L.<split>.E.weight each.
  Result<ExpertMatrices> experts(int layer, const std::string& stacked, const std::string& split, int64_t in,
                                 int64_t out, int64_t n);

 private:
  const GgufFile& file_;
  std::deque<TensorView>& slices_;
};

// Binds layer `layer`'s tensors into `w` the architecture's way.
using LayerBinder = Status (*)(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);

// `comm` (may be null: one process) as for Model::load.
Result<std::unique_ptr<Model>> load_decoder(GgufFile file, ModelConfig config, std::unique_ptr<Tokenizer> tokenizer,
                                            LayerBinder bind_layer, Communicator* comm = nullptr);

}  // namespace duet
