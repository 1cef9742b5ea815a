// `duet quantize`: rewrites a GGUF file with its weight matrices in a smaller
// type, each tensor's type chosen by quantize/policy.h. A tensor already in
// its chosen type is copied byte for byte. All metadata is copied;
// general.file_type is set to llama.cpp's LLAMA_FTYPE value for the target.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quantize/policy.h"

namespace duet {

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

// Reads `in`, writes the quantized file to out_path. Rows are converted in
// parallel on `pool`; progress (may be empty) is called after each tensor.
Result<QuantizeSummary> quantize_gguf(const GgufFile& in, const std::string& out_path,
                                      const QuantizeOptions& o, ThreadPool& pool,
                                      const QuantizeProgressFn& progress);

}  // namespace duet
