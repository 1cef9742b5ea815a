// Causal attention of a group of query heads (those sharing one KV head,
// GQA) over keys and values stored in a paged cache. One pass over the
// cache with an online softmax, a block of keys at a time, so no score
// matrix is materialized and K/V are read once for the whole group. Keys and
// values stay in their storage type (core/kv_format.h) and are dequantized
// in registers by the type's row kernels (kernels/kv_kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/kv_format.h"

namespace duet {

struct PagedKv {
  const uint8_t* k_base;      // K of the first block for this layer and KV head
  const uint8_t* v_base;      // V likewise
  size_t block_stride;        // bytes from one block's K (or V) to the next block's
  const int32_t* block_ids;   // the sequence's block table
  int32_t block_tokens;       // tokens per block
  KvType type = KvType::F32;  // element storage
  size_t scales_offset = 0;   // bytes from a block's K (or V) rows to their fp16 scales
};

// How q·k becomes a score: times `scale`, then, with a soft-cap c > 0
// (Gemma 2), c · tanh(score / c). Converts from a plain scale.
struct AttnScale {
  AttnScale(float s, float cap = 0.0f) : scale(s), softcap(cap) {}  // NOLINT: implicit from a scale
  float scale;
  float softcap;
};

// out[g][head_dim] = softmax(q[g] · K[begin..end)ᵀ · scale) · V[begin..end)
// for each of the n_group query heads in q[n_group][head_dim]. Blocks wholly
// before `begin` are never read (a sliding window may have freed them).
void attend_paged(const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                  int32_t begin, int32_t end, AttnScale scale, float* out);
// The same with the kernels of one CPU level (for tests of every level).
// At the AVX-512 level a head dim of 16-128, 160, 256 or 576 in whole vectors
// takes attend_rows_avx512's vector kernel (q4: whole 32-element groups);
// results then differ between levels by float rounding only.
void attend_paged_at(CpuLevel level, const float* q, int32_t n_group, int32_t head_dim,
                     const PagedKv& kv, int32_t begin, int32_t end, AttnScale scale, float* out);

// Rows of queries with their own key ranges: row r's n_group heads at
// q + r * q_stride attend [begins[r], ends[r]) into out + r * out_stride
// (rows are usually consecutive tokens of one sequence in a prefill chunk).
// Each row's result is attend_paged's for that row alone, bit for bit.
void attend_paged_rows(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                       const PagedKv& kv, const int32_t* begins, const int32_t* ends, AttnScale scale, float* out,
                       size_t out_stride);

// Bounds of the AVX-512 kernel's tile.
constexpr int32_t kMaxAttnRows = 8;
constexpr int32_t kMaxAttnGroup = 64;

// The AVX-512 kernel (f32 arithmetic over a cache of any type, no soft-cap)
// on up to kMaxAttnRows rows; false (nothing written) for a head dim (q4:
// not whole 32-element groups), group or block size it lacks.
bool attend_rows_avx512(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                            const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                            size_t out_stride);

}  // namespace duet
