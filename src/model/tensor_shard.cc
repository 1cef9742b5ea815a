#include "model/tensor_shard.h"

#include <cstring>

#include "kernels/packed_gemm.h"
#include "kernels/type_kernels.h"

namespace duet {

RowRange head_rows(int64_t n_vocab, int rank, int ranks) {
  const int64_t per_rank = n_vocab / ranks / kPackRows * kPackRows;
  const int64_t first = rank * per_rank;
  return {first, rank == ranks - 1 ? n_vocab - first : per_rank};
}

Status check_shardable(const ModelConfig& c, int ranks) {
  if (ranks <= 1) return {};
  if (c.n_kv_heads % ranks != 0)
    return err("cannot split ", c.n_kv_heads, " KV heads over ", ranks, " ranks: the rank count must divide the KV heads");
  if (c.n_heads % ranks != 0)
    return err("cannot split ", c.n_heads, " attention heads over ", ranks, " ranks: the rank count must divide the heads");
  if (c.qk_norm_spans_heads())
    return err(c.arch_name(), "'s q and k norms span every head of a row, which tensor parallelism splits over ranks: run it in one process");
  if (c.ffn_dim % ranks != 0)
    return err("cannot split the FFN width ", c.ffn_dim, " over ", ranks, " ranks: the rank count must divide it");
  if (c.expert_ffn_dim % ranks != 0)
    return err("cannot split the expert FFN width ", c.expert_ffn_dim, " over ", ranks,
               " ranks: the rank count must divide it");
  if (c.shared_expert_ffn_dim % ranks != 0)
    return err("cannot split the shared expert's FFN width ", c.shared_expert_ffn_dim, " over ", ranks,
               " ranks: the rank count must divide it");
  return {};
}

Result<const TensorView*> ShardSlicer::columns(const TensorView& m, int64_t first, int64_t count) {
  const int64_t block = traits(m.dtype).block_elems;
  const bool whole_blocks = first % block == 0 && count % block == 0;
  const DType type = whole_blocks ? m.dtype : DType::F32;
  DUET_ASSIGN(const size_t out_row, row_bytes(type, count));
  Slice& slice = slices_.emplace_back();
  std::vector<uint8_t>& bytes = slice.bytes;
  bytes.resize(out_row * static_cast<size_t>(m.rows()));
  if (whole_blocks) {
    // A row of blocks: columns [first, first + count) are whole blocks at a
    // byte offset, the same in every row.
    DUET_ASSIGN(const size_t skip, row_bytes(m.dtype, first));
    for (int64_t r = 0; r < m.rows(); ++r)
      std::memcpy(&bytes[static_cast<size_t>(r) * out_row], m.row(r) + skip, out_row);
  } else {
    const TypeKernels* k = type_kernels(m.dtype);
    if (!k) return err(m.name, ": cannot convert ", dtype_name(m.dtype), " rows to split them by columns");
    std::vector<float> row(static_cast<size_t>(m.ne[0]));
    for (int64_t r = 0; r < m.rows(); ++r) {
      k->to_float(m.row(r), row.data(), m.ne[0]);
      std::memcpy(&bytes[static_cast<size_t>(r) * out_row], row.data() + first, out_row);
    }
    if (notes_.empty())
      notes_ = "columns of " + m.name + " (and any like it) do not fall on " + std::string(dtype_name(m.dtype)) +
               " block boundaries at this rank count: this rank holds them as F32";
  }
  TensorView& v = slice.view = m;
  v.name = m.name + "[:, " + std::to_string(first) + ":" + std::to_string(first + count) + "]";
  v.dtype = type;
  v.ne = {count, m.rows(), 1, 1};
  v.n_dims = 2;
  v.data = bytes.data();
  v.nbytes = bytes.size();
  return &v;
}

Result<const TensorView*> ShardSlicer::block_columns(const TensorView& m, int64_t first, int64_t count,
                                                     const std::string& whole_name) {
  const int64_t block = traits(m.dtype).block_elems;
  if (first % block != 0 || count % block != 0)
    return err(whole_name, ": its ", count, " columns per rank (from column ", first, ") are not whole ",
               dtype_name(m.dtype), " blocks of ", block,
               ": run a rank count that splits the expert width into whole blocks, or quantize to a type with smaller blocks");
  return columns(m, first, count);
}

void ShardSlicer::release(const TensorView* view) {
  for (Slice& s : slices_)
    if (&s.view == view) std::vector<uint8_t>().swap(s.bytes);
}

const TensorView* ShardSlicer::elements(const TensorView* v, int64_t first, int64_t count) {
  if (!v) return nullptr;
  TensorView& s = slices_.emplace_back().view = *v;
  s.name = v->name + "[" + std::to_string(first) + ":" + std::to_string(first + count) + "]";
  s.ne = {count, 1, 1, 1};
  s.data = static_cast<const float*>(v->data) + first;
  s.nbytes = static_cast<size_t>(count) * sizeof(float);
  return &s;
}

}  // namespace duet
