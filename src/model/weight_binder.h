// Finds a file's tensors by name with the shape the config implies, or a
// clear error naming the tensor; and views of parts of them (the rows of
// a fused projection, an expert of a stacked tensor, a rank's shard).
#pragma once

#include <deque>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/layer_weights.h"

namespace duet {

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

// Binds layer `layer`'s tensors into `w` as its architecture's record lists
// them (formats/arch/): each where its role goes, fused projections as
// views of their parts.
Status bind_layer(WeightBinder& b, const ModelConfig& c, int layer, LayerWeights& w);

}  // namespace duet
