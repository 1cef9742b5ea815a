// A non-owning view of a tensor's bytes, shaped ggml-style: ne[0] is the
// length of a row (the contiguous dimension), ne[1] the number of rows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace duet {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  const void* data = nullptr;
  size_t nbytes = 0;
  // Rows interleaved 16 at a time for the int8 kernels (kernels/packed_gemm.h):
  // only matmul reads such a tensor; row() and row_stride() do not apply.
  bool packed = false;

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_stride() const { return rows() ? nbytes / static_cast<size_t>(rows()) : 0; }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_stride();
  }
};

}  // namespace duet
