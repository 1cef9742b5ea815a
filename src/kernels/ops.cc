// The elementwise operations. They cost O(n) per token against the
// projections' O(n * k), so they stay plain loops; their accuracy is what
// matters (they are compared against PyTorch's float32 results).
#include <cmath>

#include "kernels/ops.h"

#include "kernels/registry.h"

namespace duet {

void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  // The mean of squares in double is exact to float precision for any n, so
  // the result is the correctly rounded one PyTorch's float sum approximates.
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum_sq / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int32_t pos,
          const float* inv_freq) {
  // The angle pos * inv_freq is formed in double: in float its rounding error
  // grows with pos (about 2.4e-4 rad at pos 4096), which a long context feels.
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(std::sin(angle));
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim + 2 * i;
      const float x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
  }
}

void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int32_t pos,
               const float* inv_freq) {
  const int64_t half = rope_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(std::sin(angle));
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim;
      const float x0 = p[i], x1 = p[i + half];
      p[i] = x0 * c - x1 * s;
      p[i + half] = x0 * s + x1 * c;
    }
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

double exp_shifted(const float* x, float shift, double* out, int64_t n) {
  return kernels().exp_shifted()(x, shift, out, n);
}

double exp_shifted_scalar(const float* x, float shift, double* out, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += out[i] = std::exp(static_cast<double>(x[i] - shift));
  return sum;
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) { kernels().swiglu()(gate, up, out, n); }

void geglu_tanh(const float* gate, const float* up, float* out, int64_t n) { kernels().geglu()(gate, up, out, n); }

void geglu_tanh_scalar(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace duet
