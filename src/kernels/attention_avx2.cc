// AVX2 attention over a paged cache: attention_simd.h's kernels in 8-lane
// vectors, for machines without AVX-512. A 16-key block's key row is two
// vectors, so a query's 16 scores are two fma chains, 6 queries at a time
// (12 accumulators of the 16 registers), and the values go into the outputs
// of 2 heads at a time, 4 (or 2) output vectors each.
#include "kernels/attention_simd.h"

namespace duet {
namespace {

using V = vec::Vec256;
using namespace attn_simd;

// One decode part (attention.h, attend_part_avx512): each head block widened
// and transposed once for its group.
template <int HD>
void attend_part(const float* q, int32_t n_heads, int32_t n_group, const PagedKv& kv, size_t head_stride,
                 int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  PartGroup<V, HD> w;
  for_each_head_block<V, HD>(kv, head_stride, n_heads, begin, end,
                             [&](int32_t h, int32_t blk0, int first, int last, const KeyMask<V>& valid) {
                               w.select(q, out, h, n_group);
                               const float* k = widen_rows<V, HD>(head_block(kv.k_base, kv, head_stride, blk0, h),
                                                                  kv.type, kv.scales_offset, first, last, w.staged_k);
                               const float* v = value_rows<V, HD>(head_block(kv.v_base, kv, head_stride, blk0, h),
                                                                  kv.type, kv.scales_offset, first, last, w.staged_v);
                               w.attend(n_group, k, v, first, last, valid, scale, m + h * n_group, l + h * n_group);
                             });
}

}  // namespace

bool attend_part_avx2(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                      size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out) {
  if (kv.block_tokens != kKeys || n_group > kMaxAttnGroup) return false;
  if (kv.type == KvType::Q4 && head_dim % 32 != 0) return false;
  // 576 (latent attention) has its own call, as on AVX-512.
  return by_head_dim(head_dim, false, [&](auto hd) {
    attend_part<hd.value>(q, n_kv_heads, n_group, kv, head_stride, begin, end, scale, m, l, out);
    return true;
  });
}

bool attend_rows_avx2(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                      const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                      size_t out_stride) {
  return attend_rows_any<V>(q, q_stride, n_rows, n_group, head_dim, kv, begins, ends, scale, out, out_stride);
}

}  // namespace duet
