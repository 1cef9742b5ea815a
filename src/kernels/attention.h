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
#include "core/thread_pool.h"

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
// At the AVX2 and AVX-512 levels a head dim of 16-128, 160, 256 or 576 in whole
// 16-element chunks takes attend_rows_avx2's or attend_rows_avx512's vector
// kernel (q4: whole 32-element groups);
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

// Decode of one query row over every KV head at once (flash-decoding):
// q[n_kv_heads][n_group][head_dim] attends keys [begin, end) into out (the
// same layout); head h's K and V lie h * head_stride bytes after kv's. The
// keys are split over the pool's threads in whole blocks, each part read
// block by block with every head of a block in turn (one long run of the
// cache instead of one head's rows a block stride apart), and the parts'
// softmaxes (max, sum, weighted values) merged at the end. Equal to
// attend_paged per KV head to float rounding; the parts depend on the pool's
// size only, so a step's bits do not depend on which thread ran what.
void attend_paged_decode(ThreadPool& pool, const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim,
                         const PagedKv& kv, size_t head_stride, int32_t begin, int32_t end, AttnScale scale,
                         float* out);
// The same with the kernels of one CPU level, in n_parts parts run one after
// another (for tests of the split at every level).
void attend_paged_decode_at(CpuLevel level, int32_t n_parts, const float* q, int32_t n_kv_heads, int32_t n_group,
                            int32_t head_dim, const PagedKv& kv, size_t head_stride, int32_t begin, int32_t end,
                            AttnScale scale, float* out);

// Bounds of the AVX-512 kernel's tile: rows, query heads per KV head, and
// queries (rows x group).
constexpr int32_t kMaxAttnRows = 32;
constexpr int32_t kMaxAttnGroup = 64;
constexpr int32_t kMaxAttnQueries = 512;
// Rows of a prefill tile: a block's K and V are widened and K transposed
// once per tile, so a tile wants ~64 queries to share that (one query head
// per KV head: 32 rows, where 8 rows left a 7B-shaped prefill at ~20 % of
// the FMA peak, the widening as costly as the arithmetic); more rows widen
// the triangle of keys that some rows compute and mask.
constexpr int32_t attn_tile_rows(int32_t n_group) {
  const int32_t rows = 64 / (n_group > 0 ? n_group : 1);
  return rows < 8 ? 8 : rows > kMaxAttnRows ? kMaxAttnRows : rows;
}

// The AVX-512 kernel (f32 arithmetic over a cache of any type, no soft-cap)
// on up to kMaxAttnRows rows and kMaxAttnQueries queries; false (nothing written) for a head dim (q4:
// not whole 32-element groups), group or block size it lacks.
bool attend_rows_avx512(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                            const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                            size_t out_stride);

// The same kernel in 8-lane vectors for AVX2 machines (attention_simd.h
// holds both widths' steps): the same head dims, types and bounds, results
// within float rounding of the AVX-512 kernel's.
bool attend_rows_avx2(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                      const PagedKv& kv, const int32_t* begins, const int32_t* ends, float scale, float* out,
                      size_t out_stride);

// The AVX-512 kernel of one decode part: every head's query heads over keys
// [begin, end), block by block and head by head within a block, leaving
// per query head (n_kv_heads * n_group of them) the running max in m, the
// sum of weights in l and the unnormalized weighted values in out (all
// initialized by the caller: -inf, 0, 0). false (nothing written) where
// attend_rows_avx512 would say no, and for a head dim of 576 (latent
// attention has its own call).
bool attend_part_avx512(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                        size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out);
// The same for AVX2, each head block widened and transposed once whatever
// the group (AVX-512 reads rows in place for groups under 4).
bool attend_part_avx2(const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                      size_t head_stride, int32_t begin, int32_t end, float scale, float* m, float* l, float* out);

}  // namespace duet
