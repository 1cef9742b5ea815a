#include "model/weight_binder.h"

#include "formats/llama_names.h"
#include "kernels/packed_gemm.h"
#include "kernels/quant.h"
#include "kernels/type_kernels.h"

namespace duet {
namespace {

namespace n = gguf_names;

// A weight of a type with no kernels; for one duet can still read
// (dequantize_row), the way to a file it can run.
Error no_kernels(const std::string& path, const std::string& name, DType t) {
  return err(path, ": tensor ", name, " has dtype ", dtype_name(t), " which duet cannot compute with",
             dequantizable(t) ? " (`duet quantize` converts the file to a type it can, e.g. q4_k)" : "");
}

// ne1 0: a vector of ne0 elements.
Result<const TensorView*> require(const GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1) {
  const TensorView* t = file.tensor(name);
  if (!t) return err(file.path(), ": missing tensor ", name);
  const bool is_vector = ne1 == 0;
  const bool shape_ok = is_vector ? (t->n_dims == 1 && t->ne[0] == ne0)
                                  : (t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1);
  if (!shape_ok)
    return err(file.path(), ": tensor ", name, " has shape [", t->ne[0], ", ", t->ne[1], "], expected [", ne0,
               is_vector ? "" : ", ", is_vector ? "" : std::to_string(ne1), "]");
  if (is_vector && t->dtype != DType::F32)
    return err(file.path(), ": norm tensor ", name, " must be F32, not ", dtype_name(t->dtype));
  if (!is_vector && !type_kernels(t->dtype)) return no_kernels(file.path(), name, t->dtype);
  return t;
}

// Qwen2-MoE's shared-expert gate, stored as a vector [dim] or a one-row
// matrix [dim, 1]: a one-row matrix here.
Result<const TensorView*> one_row(WeightBinder& b, const std::string& name, int64_t dim) {
  Result<const TensorView*> v = b.vector(name, dim);
  if (!v.ok()) v = b.matrix(name, dim, 1);
  if (!v.ok()) return v.error();
  return b.rows(**v, 0, 1);
}

// A fused projection's parts as views of their rows: Phi-3's attn_qkv (q,
// k, v) and ffn_up (gate's rows, then up's).
void split_fused(WeightBinder& b, const ModelConfig& c, Role role, const TensorView& m, LayerWeights& w) {
  if (role == Role::kQkv) {
    w.wq = b.rows(m, 0, c.q_dim());
    w.wk = b.rows(m, c.q_dim(), c.kv_dim());
    w.wv = b.rows(m, c.q_dim() + c.kv_dim(), c.kv_dim());
    return;
  }
  w.w_gate = b.rows(m, 0, c.ffn_dim);
  w.w_up = b.rows(m, c.ffn_dim, c.ffn_dim);
}

Status bind_tensor(WeightBinder& b, const ModelConfig& c, int l, const LayerTensor& t, LayerWeights& w) {
  const std::string name = t.bias ? n::blk_bias(l, t.gguf) : n::blk(l, t.gguf);
  if (t.optional && !b.has(name)) return {};
  if (t.n_experts > 0) {
    DUET_ASSIGN(*expert_field(w, t.role), b.experts(l, t.gguf, t.gguf_expert, t.in, t.out, t.n_experts));
    return {};
  }
  const TensorView* LayerWeights::*field = role_field(t.role);
  if (t.role == Role::kSharedRouter) {
    DUET_ASSIGN(w.*field, one_row(b, name, t.in));
  } else if (t.is_vector()) {
    DUET_ASSIGN(w.*field, b.vector(name, t.out));
  } else if (field) {
    DUET_ASSIGN(w.*field, b.matrix(name, t.in, t.out));
  } else {
    DUET_ASSIGN(const TensorView* m, b.matrix(name, t.in, t.out));
    split_fused(b, c, t.role, *m, w);
  }
  return {};
}

}  // namespace

const TensorView* LayerWeights::*role_field(Role role) {
  for (const RoleField& r : kRoleFields)
    if (r.role == role) return r.field;
  return nullptr;
}

ExpertMatrices* expert_field(LayerWeights& w, Role role) {
  switch (role) {
    case Role::kExpGate: return &w.exp_gate;
    case Role::kExpUp: return &w.exp_up;
    case Role::kExpDown: return &w.exp_down;
    default: return nullptr;
  }
}

Result<const TensorView*> WeightBinder::matrix(const std::string& name, int64_t in, int64_t out) const {
  return require(file_, name, in, out);
}

Result<const TensorView*> WeightBinder::vector(const std::string& name, int64_t size) const {
  return require(file_, name, size, 0);
}

const TensorView* WeightBinder::rows(const TensorView& m, int64_t first, int64_t count) {
  TensorView& v = slices_.emplace_back(m);
  v.name = m.name + "[" + std::to_string(first) + ":" + std::to_string(first + count) + "]";
  v.n_dims = 2;
  v.ne = {m.ne[0], count, 1, 1};
  // Packed bytes come in 16-row groups of one size (kernels/packed_gemm.h);
  // a packed view's nbytes stays the file's.
  const size_t unit = m.packed ? packed_bytes(m) / static_cast<size_t>(m.rows() / kPackRows) : m.row_stride();
  const int64_t per_unit = m.packed ? kPackRows : 1;
  v.data = static_cast<const uint8_t*>(m.data) + unit * static_cast<size_t>(first / per_unit);
  v.nbytes = unit * static_cast<size_t>(count / per_unit);
  return &v;
}

Result<ExpertMatrices> WeightBinder::experts(int layer, const std::string& stacked, const std::string& split,
                                             int64_t in, int64_t out, int64_t count) {
  ExpertMatrices m;
  const std::string name = n::blk(layer, stacked);
  if (const TensorView* t = file_.tensor(name)) {
    if (t->n_dims != 3 || t->ne[0] != in || t->ne[1] != out || t->ne[2] != count)
      return err(file_.path(), ": tensor ", name, " has shape [", t->ne[0], ", ", t->ne[1], ", ", t->ne[2],
                 "], expected [", in, ", ", out, ", ", count, "] (", count, " experts of ", out, " rows of ", in, ")");
    if (!type_kernels(t->dtype)) return no_kernels(file_.path(), name, t->dtype);
    m.stacked = rows(*t, 0, out * count);  // the same bytes as one matrix of every expert's rows
    for (int64_t e = 0; e < count; ++e) m.experts.push_back(rows(*m.stacked, e * out, out));
    return m;
  }
  if (!has(n::blk_expert(layer, split, 0)))
    return err(file_.path(), ": missing tensor ", name, " (nor ", n::blk_expert(layer, split, 0), " for split experts)");
  for (int64_t e = 0; e < count; ++e) {
    DUET_ASSIGN(const TensorView* t, matrix(n::blk_expert(layer, split, static_cast<int>(e)), in, out));
    m.experts.push_back(t);
  }
  return m;
}

Status bind_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w) {
  for (const LayerTensor& t : arch_record(c.arch).layer_tensors(c, layer)) DUET_TRY(bind_tensor(b, c, layer, t, w));
  return {};
}

}  // namespace duet
