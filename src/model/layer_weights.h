// A layer's tensors as the forward pass reads them, one field per role of
// the architecture records' inventory (formats/arch/arch.h), and the one
// table from roles to fields that binding, sharding and packing walk.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"
#include "formats/arch/arch.h"

namespace duet {

// One FFN matrix of a mixture of experts: each expert's as a matrix of its
// own, and `stacked` (every expert's rows as one matrix) where the file
// stacks them, so packing copies it once and the experts become views of
// the copy.
struct ExpertMatrices {
  const TensorView* stacked = nullptr;
  std::vector<const TensorView*> experts;
};

// Null where the architecture has none.
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
  const TensorView* q_norm = nullptr;     // q/k norms [head_dim], or [q_dim] / [kv_dim] across heads
  const TensorView* k_norm = nullptr;
  const TensorView* post_attn_norm = nullptr;  // [dim] (Gemma 2/3, OLMo 2)
  const TensorView* post_ffn_norm = nullptr;
  // A mixture-of-experts FFN instead of w_gate/w_up/w_down (model/moe.h).
  const TensorView* router = nullptr;     // [n_experts rows][dim]
  ExpertMatrices exp_gate, exp_up;        // each expert [expert_ffn rows][dim]
  ExpertMatrices exp_down;                // each expert [dim rows][expert_ffn]
  // A shared expert beside the routed ones (Qwen2-MoE, DeepSeek-V2), with
  // its gate's weights as a one-row matrix [1 row][dim] (null: not gated).
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

// How tensor parallelism splits a role's tensor over ranks: whole on every
// rank; its rows (heads, FFN units: bias vectors split alike); its columns
// (the projections back into the residual stream, whose partial sums the
// ranks add).
enum class Shard : uint8_t { kWhole, kRows, kColumns };

struct RoleField {
  Role role;
  const TensorView* LayerWeights::*field;
  Shard shard;
  bool packed;  // the int8 kernels take it packed (attn_kv_b stays as the file has it)
};

// Every single-tensor role (the fused q/k/v and gate/up are bound as their
// parts; the experts are ExpertMatrices).
inline constexpr RoleField kRoleFields[] = {
    {Role::kAttnNorm, &LayerWeights::attn_norm, Shard::kWhole, false},
    {Role::kQ, &LayerWeights::wq, Shard::kRows, true},
    {Role::kK, &LayerWeights::wk, Shard::kRows, true},
    {Role::kV, &LayerWeights::wv, Shard::kRows, true},
    {Role::kOut, &LayerWeights::wo, Shard::kColumns, true},
    {Role::kQBias, &LayerWeights::bq, Shard::kRows, false},
    {Role::kKBias, &LayerWeights::bk, Shard::kRows, false},
    {Role::kVBias, &LayerWeights::bv, Shard::kRows, false},
    {Role::kQNorm, &LayerWeights::q_norm, Shard::kWhole, false},
    {Role::kKNorm, &LayerWeights::k_norm, Shard::kWhole, false},
    {Role::kPostAttnNorm, &LayerWeights::post_attn_norm, Shard::kWhole, false},
    {Role::kFfnNorm, &LayerWeights::ffn_norm, Shard::kWhole, false},
    {Role::kGate, &LayerWeights::w_gate, Shard::kRows, true},
    {Role::kUp, &LayerWeights::w_up, Shard::kRows, true},
    {Role::kDown, &LayerWeights::w_down, Shard::kColumns, true},
    {Role::kPostFfnNorm, &LayerWeights::post_ffn_norm, Shard::kWhole, false},
    {Role::kRouter, &LayerWeights::router, Shard::kWhole, true},
    {Role::kSharedGate, &LayerWeights::shared_gate, Shard::kRows, true},
    {Role::kSharedUp, &LayerWeights::shared_up, Shard::kRows, true},
    {Role::kSharedDown, &LayerWeights::shared_down, Shard::kColumns, true},
    {Role::kSharedRouter, &LayerWeights::shared_router, Shard::kWhole, false},
    {Role::kQA, &LayerWeights::wq_a, Shard::kWhole, true},
    {Role::kQANorm, &LayerWeights::q_a_norm, Shard::kWhole, false},
    {Role::kKvA, &LayerWeights::wkv_a, Shard::kWhole, true},
    {Role::kKvANorm, &LayerWeights::kv_a_norm, Shard::kWhole, false},
    {Role::kKvB, &LayerWeights::wkv_b, Shard::kRows, false},
};

// The field of a single-tensor role; nullptr for the fused and expert roles.
const TensorView* LayerWeights::*role_field(Role role);
// The experts of an expert role; nullptr for any other.
ExpertMatrices* expert_field(LayerWeights& w, Role role);

// Calls f(field, tensor slot) for each bound single tensor of w (a
// LayerWeights or a const one).
template <class W, class F>
void for_each_tensor(W& w, F f) {
  for (const RoleField& r : kRoleFields)
    if (w.*r.field) f(r, w.*r.field);
}

}  // namespace duet
