// The forward pass's operations on float activations. Each has one scalar
// definition; SIMD variants are chosen at start-up behind the same signature.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace duet {

// y[t][o] = sum_i x[t][i] * W[o][i] for t < m, o < W.ne[1]; W in any dtype with
// kernels, x row-major [m][W.ne[0]], y row-major [m][W.ne[1]]. Multithreaded
// over output rows; activations converted once to W's vec_dot_type. `scratch`
// must hold activation_scratch_bytes(W, m) bytes.
void matmul(const TensorView& w, const float* x, int64_t m, float* y, void* scratch,
            ThreadPool& pool);
size_t activation_scratch_bytes(const TensorView& w, int64_t m);
// matmul of each ws[i] into ys[i], all on the same x (q, k and v; gate and
// up): packed weights of one dtype have x quantized once and share one
// parallel region; results equal separate matmul calls bit for bit.
void matmul_shared(std::span<const TensorView* const> ws, const float* x, int64_t m, std::span<float* const> ys,
                   void* scratch, ThreadPool& pool);

// One product of a grouped matmul: y [m][w.ne[1]] = x [m][w.ne[0]] · wᵀ, or,
// where `rows` is set, the product with rows rows[0..m) of x, which holds
// x_rows rows (a mixture of experts' tokens routed to one expert).
struct MatmulItem {
  const TensorView* w;
  const float* x;
  int64_t m;
  float* y;
  const int32_t* rows = nullptr;
  int64_t x_rows = 0;
};
// Every item's matmul, each on its own activations (a mixture of experts'
// active experts, each over the tokens routed to it): packed weights of one
// dtype and width run in one parallel region over all their rows, so a
// decode step waits for its threads once, not once per expert; items that
// share x (consecutive, same pointer, rows and m) have it quantized once,
// and items that pick rows of one x have all of its rows quantized once and
// their blocks gathered. Results equal separate matmul calls on the picked
// rows bit for bit. `scratch` must hold grouped_scratch_bytes(w, the items'
// total m, the x_rows of each x that items pick rows of).
void matmul_grouped(std::span<const MatmulItem> items, void* scratch, ThreadPool& pool);
size_t grouped_scratch_bytes(const TensorView& w, int64_t total_m, int64_t source_rows = 0);

// y = x / rms(x) * weight, per row of n; eps inside the root.
void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps);

// Rotates pairs of `head_dim`-wide heads in place at position pos, over the
// first rope_dim dims of each head. Normal (GPT-J, interleaved pairs 2i,2i+1)
// layout, as llama uses in GGUF. inv_freq has rope_dim/2 entries.
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int32_t pos,
          const float* inv_freq);

// As rope(), in the NeoX layout: dim i pairs with dim i + rope_dim/2.
void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, int32_t pos,
               const float* inv_freq);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = exp(double(x[i] - shift)) for i < n, and their sum: the sampler's
// weights, in double so that probabilities over a 32000-token vocabulary keep
// 1e-12 accuracy. The AVX-512 level (a vector exp, within 2 ulp of std::exp)
// is ~6x the scalar loop, which was half of a sampled token's cost; AVX2 runs
// the same exp in 4 lanes.
double exp_shifted(const float* x, float shift, double* out, int64_t n);
double exp_shifted_scalar(const float* x, float shift, double* out, int64_t n);
double exp_shifted_avx2(const float* x, float shift, double* out, int64_t n);
double exp_shifted_avx512(const float* x, float shift, double* out, int64_t n);

// out[i] = silu(gate[i]) * up[i]; the active level's version (AVX2 and
// AVX-512: one vector exp, the same bits, within 1e-6 relative of the scalar one).
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n);
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n);
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu(gate[i]) * up[i], GELU in its tanh approximation (GeGLU, as
// Gemma's "gelu_pytorch_tanh"). out may alias gate. The vector version
// writes 0.5 (1 + tanh(u)) as sigmoid(2u), one exp per element.
void geglu_tanh(const float* gate, const float* up, float* out, int64_t n);
void geglu_tanh_scalar(const float* gate, const float* up, float* out, int64_t n);
void geglu_tanh_avx2(const float* gate, const float* up, float* out, int64_t n);
void geglu_tanh_avx512(const float* gate, const float* up, float* out, int64_t n);

}  // namespace duet
