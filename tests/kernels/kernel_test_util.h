// Random weights and activations for the kernel tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels/packed_gemm.h"

namespace duet::testing {

// Every level this machine can run, scalar first.
// Vector lengths around every SIMD width's edges.
inline constexpr int64_t kLengths[] = {1, 7, 31, 33, 100, 257, 1000, 2049};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// w in the packed layout the kernels read.
inline std::vector<uint8_t> packed_copy(const TensorView& w) {
  std::vector<uint8_t> out(packed_bytes(w));
  pack_weights(w, out.data());
  return out;
}

inline std::vector<CpuLevel> runnable_levels() {
  std::vector<CpuLevel> levels;
  for (int l = 0; l <= static_cast<int>(cpu_features().best_level()); ++l)
    levels.push_back(static_cast<CpuLevel>(l));
  return levels;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// A view of bytes as a weight matrix [rows][k] of type t.
inline TensorView matrix_view(DType t, int64_t k, int64_t rows, const std::vector<uint8_t>& bytes) {
  TensorView v;
  v.name = "w";
  v.dtype = t;
  v.n_dims = 2;
  v.ne = {k, rows, 1, 1};
  v.data = bytes.data();
  v.nbytes = bytes.size();
  return v;
}

// A float-type weight matrix [rows][k] with its exact values as floats.
struct FloatWeights {
  DType dtype;
  int64_t k = 0, rows = 0;
  std::vector<uint8_t> bytes;   // [rows][k] in dtype
  std::vector<float> values;    // [rows][k], what the bytes decode to

  TensorView view() const { return matrix_view(dtype, k, rows, bytes); }
  const uint8_t* row(int64_t r) const { return bytes.data() + r * (bytes.size() / rows); }
};

inline FloatWeights random_weights(DType t, int64_t k, int64_t rows, uint32_t seed) {
  FloatWeights w{t, k, rows, {}, random_floats(static_cast<size_t>(k * rows), seed)};
  const size_t n = w.values.size();
  if (t == DType::F32) {
    w.bytes.resize(n * 4);
    std::memcpy(w.bytes.data(), w.values.data(), n * 4);
    return w;
  }
  w.bytes.resize(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = t == DType::F16 ? f32_to_f16(w.values[i]) : f32_to_bf16(w.values[i]);
    std::memcpy(w.bytes.data() + 2 * i, &h, 2);
    w.values[i] = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  return w;
}

}  // namespace duet::testing
