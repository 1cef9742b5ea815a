// `duet quantize`: rewrites a GGUF file with its weight matrices in a smaller
// type. The per-tensor policy follows what other GGUF tools do, so the files
// look like theirs:
//  - tensors with one dimension (norms, biases, RoPE factors) stay as they are;
//  - token_embd.weight and output.weight keep Q8_0 when the target has fewer
//    bits (the head and the embedding are where low precision costs most);
//  - a matrix whose rows do not divide into the target's blocks (256 for the
//    K-quants, 32 for the others) falls back to the nearest type that fits,
//    at least as precise: Q4_K -> Q4_1, Q5_K/Q6_K -> Q8_0 when the row
//    divides into 32, else F16 (F32 when the target is F32);
//  - names matched by a --keep pattern are copied unchanged;
//  - a tensor already in its chosen type is copied byte for byte.
// All metadata is copied; general.file_type is set to llama.cpp's
// LLAMA_FTYPE value for the target.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"

namespace duet {

// Per weight tensor (by name), one importance per input channel (ne[0]
// values >= 0, e.g. the mean squared activation that multiplies that column).
using ChannelImportance = std::map<std::string, std::vector<float>>;

struct QuantizeOptions {
  DType target = DType::Q8_0;
  // Tensor names to copy unchanged: each pattern is a glob matched against the
  // whole name ("blk.*.ffn_down.weight") or, failing that, an ECMAScript
  // regular expression searched in it ("attn_(q|k)").
  std::vector<std::string> keep;
  // With importance, quantizers minimize the importance-weighted squared
  // error instead of their default one (not owned; may be null).
  const ChannelImportance* importance = nullptr;
};

// The types `duet quantize` can target.
bool is_quantize_target(DType t);
// llama.cpp's LLAMA_FTYPE for a file whose matrices are mostly `target`.
Result<uint32_t> llama_file_type(DType target);

// True if `name` matches the pattern as described for QuantizeOptions::keep.
bool name_matches(const std::string& pattern, const std::string& name);

struct TensorChoice {
  DType type;
  std::string_view reason;  // "target", "kept", "1-D", "embedding/head", "row fallback"
};
TensorChoice choose_tensor_type(const TensorView& t, const QuantizeOptions& o);

struct QuantizeProgress {
  size_t index = 0;  // of the tensor just written, from 0
  size_t count = 0;
  const TensorView* tensor = nullptr;
  TensorChoice choice{DType::F32, ""};
  uint64_t bytes_in = 0;   // so far, this tensor included
  uint64_t bytes_out = 0;
};

struct QuantizeSummary {
  uint64_t bytes_in = 0;   // tensor data, before and after
  uint64_t bytes_out = 0;
  int64_t elements = 0;
  std::map<DType, int> tensors_by_type;  // in the output

  double bits_per_weight_in() const { return elements ? 8.0 * bytes_in / elements : 0; }
  double bits_per_weight_out() const { return elements ? 8.0 * bytes_out / elements : 0; }
};

using QuantizeProgressFn = std::function<void(const QuantizeProgress&)>;

// Converts a row of k elements of `from` to k floats (any type duet reads).
Status row_to_float(DType from, const void* src, float* dst, int64_t k);
// Converts k floats to `to`, minimizing the importance-weighted error when
// importance (k values) is given.
Status row_from_float(DType to, const float* src, void* dst, int64_t k,
                      const float* importance);

// Reads `in`, writes the quantized file to out_path. Rows are converted in
// parallel on `pool`; progress (may be empty) is called after each tensor.
Result<QuantizeSummary> quantize_gguf(const GgufFile& in, const std::string& out_path,
                                      const QuantizeOptions& o, ThreadPool& pool,
                                      const QuantizeProgressFn& progress);

}  // namespace duet
