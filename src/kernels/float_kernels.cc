// Scalar reference kernels of the float weight types: the plain loops every
// SIMD level is tested against.
#include <cstring>

#include "core/half.h"
#include "kernels/float_kernels.h"

namespace duet {
namespace {

struct F32Elem {
  using Storage = float;
  static float get(const float* p, int64_t i) { return p[i]; }
};
struct F16Elem {
  using Storage = uint16_t;
  static float get(const uint16_t* p, int64_t i) { return f16_to_f32(p[i]); }
};
struct BF16Elem {
  using Storage = uint16_t;
  static float get(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
};

void copy_f32(const float* x, void* y, int64_t k) {
  std::memcpy(y, x, static_cast<size_t>(k) * sizeof(float));
}

template <class E>
float vec_dot(int64_t k, const void* w_row, const void* x_row) {
  const auto* w = static_cast<const typename E::Storage*>(w_row);
  const auto* x = static_cast<const float*>(x_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += E::get(w, i) * x[i];
  return sum;
}

template <class E>
void to_float(const void* row, float* y, int64_t k) {
  const auto* w = static_cast<const typename E::Storage*>(row);
  for (int64_t i = 0; i < k; ++i) y[i] = E::get(w, i);
}

template <class E>
void dot_block(int64_t k, const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
               int64_t n_tok, float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < n_rows; ++r) y[t * y_stride + r] = vec_dot<E>(k, w + r * w_stride, x + t * x_stride);
}

template <class E>
constexpr TypeKernels make() {
  return {DType::F32, copy_f32, vec_dot<E>, to_float<E>, dot_block<E>};
}

}  // namespace

constexpr FloatTypeKernels kFloatScalar = {make<F32Elem>(), make<F16Elem>(), make<BF16Elem>()};

}  // namespace duet
