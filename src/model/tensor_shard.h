// One rank's part of a tensor-parallel model (docs/scaling.md): of N ranks,
// rank r keeps query heads [r·H/N, (r+1)·H/N) with their KV heads, and FFN
// columns [r·F/N, (r+1)·F/N) — of the dense FFN, of every expert and of a
// shared expert alike (a router is whole on every rank, so all ranks route
// every token the same way). q, k, v, gate and up are split by output rows
// (each rank computes its heads' and columns' outputs); the attention output
// and FFN down projections are split by input columns, so each rank's
// product is a partial sum of the full one, and an allreduce joins them.
// The vocabulary head is split by rows (rank r's logits are a range of the
// vocabulary), which rank 0 gathers.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "formats/model_config.h"

namespace duet {

// Rows [first, first + count) of a matrix.
struct RowRange {
  int64_t first = 0, count = 0;
};

// The rows of the vocabulary head that rank `rank` of `ranks` computes:
// whole 16-row groups of the packed layout (kernels/packed_gemm.h), the
// same count on every rank but the last, which takes the rest (a
// vocabulary need not be a multiple of anything).
RowRange head_rows(int64_t n_vocab, int rank, int ranks);

// Why `c` cannot be split over `ranks` ranks (heads, KV heads, FFN or expert
// widths not divisible), or nothing.
Status check_shardable(const ModelConfig& c, int ranks);

// Column ranges of matrices and element ranges of vectors, as views that
// live as long as this object. A column range of a quantized matrix is a
// copy of whole blocks from every row; where the range does not fall on
// block boundaries it is dequantized to F32 instead (and noted).
class ShardSlicer {
 public:
  // Columns [first, first + count) of every row of `m` (file layout).
  Result<const TensorView*> columns(const TensorView& m, int64_t first, int64_t count);
  // The same, but an error naming `whole_name` where the range is not whole
  // blocks: for experts, whose bytes are most of a model, an F32 copy is no
  // fallback.
  Result<const TensorView*> block_columns(const TensorView& m, int64_t first, int64_t count,
                                          const std::string& whole_name);
  // Elements [first, first + count) of an F32 vector; null stays null.
  const TensorView* elements(const TensorView* v, int64_t first, int64_t count);
  // Frees the bytes behind `view` if it is one of this slicer's column
  // copies (once packing has copied it again); anything else is ignored.
  void release(const TensorView* view);
  // What had to fall back to F32, for Model::load_notes(); empty if nothing.
  const std::string& notes() const { return notes_; }

 private:
  struct Slice {
    TensorView view;
    std::vector<uint8_t> bytes;  // empty for a vector range (a view of the file)
  };
  std::deque<Slice> slices_;
  std::string notes_;
};

}  // namespace duet
