#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace duet {
namespace {

constexpr int32_t kMaxGroup = 64;
constexpr int32_t kMaxBlock = 64;

float dot(const float* a, const float* b, int32_t n) {
  float s = 0.0f;
  for (int32_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void attend_paged(const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                  int32_t begin, int32_t end, float scale, float* out) {
  // Running max and denominator per query head; out holds the unnormalized sum.
  float m[kMaxGroup], l[kMaxGroup], s[kMaxBlock];
  std::fill(m, m + n_group, -std::numeric_limits<float>::infinity());
  std::fill(l, l + n_group, 0.0f);
  std::fill(out, out + static_cast<size_t>(n_group) * head_dim, 0.0f);

  for (int32_t start = begin; start < end;) {
    const int32_t in_block = start % kv.block_tokens;
    const int32_t len = std::min(kv.block_tokens - in_block, end - start);
    const size_t block = static_cast<size_t>(kv.block_ids[start / kv.block_tokens]);
    const float* k = kv.k_base + block * kv.block_stride + static_cast<size_t>(in_block) * head_dim;
    const float* v = kv.v_base + block * kv.block_stride + static_cast<size_t>(in_block) * head_dim;
    start += len;
    for (int32_t g = 0; g < n_group; ++g) {
      const float* qg = q + static_cast<size_t>(g) * head_dim;
      float* og = out + static_cast<size_t>(g) * head_dim;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int32_t t = 0; t < len; ++t) {
        s[t] = dot(qg, k + static_cast<size_t>(t) * head_dim, head_dim) * scale;
        block_max = std::max(block_max, s[t]);
      }
      const float new_max = std::max(m[g], block_max);
      const float correction = std::exp(m[g] - new_max);
      l[g] *= correction;
      for (int32_t d = 0; d < head_dim; ++d) og[d] *= correction;
      for (int32_t t = 0; t < len; ++t) {
        const float p = std::exp(s[t] - new_max);
        l[g] += p;
        const float* vt = v + static_cast<size_t>(t) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) og[d] += p * vt[d];
      }
      m[g] = new_max;
    }
  }
  for (int32_t g = 0; g < n_group; ++g) {
    const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    float* og = out + static_cast<size_t>(g) * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) og[d] *= inv;
  }
}

}  // namespace duet
