// The FFN block: a gated dense FFN, or a mixture of experts (with a shared
// expert) where the layer has a router.
#include "model/decoder_model.h"

namespace duet {

void DecoderModel::ffn_block(int layer, int32_t n, ThreadPool& pool) {
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  norm_rows(w.ffn_norm, n, pool);
  if (w.router)
    moe_ffn(layer, n, pool);
  else
    dense_ffn(w, n, pool);
  add_residual(w.post_ffn_norm, n, pool);
}

// gate = act(gate) * up over n rows of `width`.
void DecoderModel::glu_rows(float* gate, const float* up, int32_t n, size_t width, ThreadPool& pool) {
  const auto glu = config_.ffn_act == FfnActivation::kGeluTanh ? geglu_tanh : swiglu;
  // An exp per element: weighed as twice a row's width.
  for_rows(pool, n, 2 * width, [&](int32_t i) {
    glu(&gate[i * width], &up[i * width], &gate[i * width], static_cast<int64_t>(width));
  });
}

void DecoderModel::dense_ffn(const LayerWeights& w, int32_t n, ThreadPool& pool) {
  mm_shared({w.w_gate, w.w_up}, ws_.xn.data(), n, {ws_.gate.data(), ws_.up.data()}, pool);
  glu_rows(ws_.gate.data(), ws_.up.data(), n, static_cast<size_t>(config_.ffn_dim), pool);
  mm(*w.w_down, ws_.gate.data(), n, ws_.proj.data(), pool);
  join_ranks(n);
}

// The observer sees an item's input rows, one at a time where they are
// picked from the batch.
void DecoderModel::observe_item(const MatmulItem& item) {
  if (!item.rows) return observer_->observe(*item.w, item.x, static_cast<int32_t>(item.m));
  for (int64_t t = 0; t < item.m; ++t)
    observer_->observe(*item.w, item.x + static_cast<int64_t>(item.rows[t]) * item.w->ne[0], 1);
}

// Every active expert runs once over the rows routed to it (all of a
// decode step's, or a prefill chunk's), so its weights stream once per
// step; all experts' products go in one grouped matmul (gate and up
// together, then down), and each row's outputs add up in expert order,
// whatever the batch.
void DecoderModel::moe_ffn(int layer, int32_t n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  const size_t dim = static_cast<size_t>(c.dim), ffn = static_cast<size_t>(c.expert_ffn_dim);
  mm(*w.router, ws_.xn.data(), n, ws_.router_logits.data(), pool);
  route_tokens(ws_.router_logits.data(), n, c.n_experts, c.n_experts_used, c.expert_weights_norm, ws_.routes);
  const ExpertRoutes& r = ws_.routes;
  const auto n_routed = static_cast<int32_t>(r.rows.size());
  // Per active expert, its rows' slices of the routed buffers: gate and up
  // (side by side, so the rows they share are quantized once) in one
  // grouped matmul, then down in another. in(e, item): expert e's input
  // rows set in the item.
  std::vector<MatmulItem>& items = ws_.moe_items;
  const auto add_items = [&](std::initializer_list<std::pair<const ExpertMatrices*, float*>> outs, auto in,
                             size_t y_width) {
    items.clear();
    for (int32_t e = 0; e < c.n_experts; ++e) {
      const auto ue = static_cast<size_t>(e), at = static_cast<size_t>(r.offset[ue]);
      if (r.count(e) == 0) continue;
      for (const auto& [mats, y] : outs) {
        MatmulItem item{mats->experts[ue], nullptr, r.count(e), y + at * y_width};
        in(e, item);
        if (observer_) observe_item(item);
        items.push_back(item);
      }
    }
  };
  // An expert's tokens are picked from the batch (matmul_grouped quantizes
  // the batch once and gathers each expert's rows); one that every row
  // routes to (all of a decode step's experts) reads the batch as it is.
  const auto routed_x = [&](int32_t e, MatmulItem& item) {
    item.x = ws_.xn.data();
    if (r.count(e) == n) return;
    item.rows = &r.rows[static_cast<size_t>(r.offset[static_cast<size_t>(e)])];
    item.x_rows = n;
  };
  add_items({{&w.exp_gate, ws_.gate.data()}, {&w.exp_up, ws_.up.data()}}, routed_x, ffn);
  matmul_grouped(items, ws_.scratch.data(), pool);
  glu_rows(ws_.gate.data(), ws_.up.data(), n_routed, ffn, pool);
  const auto gated_x = [&](int32_t e, MatmulItem& item) {
    item.x = &ws_.gate[static_cast<size_t>(r.offset[static_cast<size_t>(e)]) * ffn];
  };
  add_items({{&w.exp_down, ws_.moe_y.data()}}, gated_x, dim);
  matmul_grouped(items, ws_.scratch.data(), pool);
  for (int32_t e = 0; e < c.n_experts; ++e)
    if (r.count(e) > 0)
      expert_tokens_[static_cast<size_t>(layer) * static_cast<size_t>(c.n_experts) + static_cast<size_t>(e)].fetch_add(
          static_cast<uint64_t>(r.count(e)), std::memory_order_relaxed);
  const auto k = static_cast<size_t>(c.n_experts_used);
  for_rows(pool, n, dim * k, [&](int32_t i) {  // each row sums its experts' outputs in expert order
    float* out = &ws_.proj[i * dim];
    std::fill_n(out, dim, 0.0f);
    for (size_t j = 0; j < k; ++j) {
      const auto entry = static_cast<size_t>(r.entries[i * k + j]);
      const float* y = &ws_.moe_y[entry * dim];
      const float weight = r.weights[entry] * c.expert_weights_scale;
      for (size_t d = 0; d < dim; ++d) out[d] += weight * y[d];
    }
  });
  if (w.shared_gate) shared_expert(w, n, pool);
  join_ranks(n);
}

// The shared expert on every row, added after the routed ones, through
// sigmoid(x · g) where it is gated.
void DecoderModel::shared_expert(const LayerWeights& w, int32_t n, ThreadPool& pool) {
  const size_t dim = static_cast<size_t>(config_.dim);
  mm_shared({w.shared_gate, w.shared_up}, ws_.xn.data(), n, {ws_.gate.data(), ws_.up.data()}, pool);
  glu_rows(ws_.gate.data(), ws_.up.data(), n, static_cast<size_t>(config_.shared_expert_ffn_dim), pool);
  mm(*w.shared_down, ws_.gate.data(), n, ws_.moe_y.data(), pool);
  if (w.shared_router) mm(*w.shared_router, ws_.xn.data(), n, ws_.router_logits.data(), pool);
  for_rows(pool, n, dim, [&](int32_t i) {
    const float s = w.shared_router ? 1.0f / (1.0f + std::exp(-ws_.router_logits[static_cast<size_t>(i)])) : 1.0f;
    for (size_t j = 0; j < dim; ++j) ws_.proj[i * dim + j] += s * ws_.moe_y[i * dim + j];
  });
}

}  // namespace duet
