#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kv_rows.h"
#include "kernels/registry.h"

namespace duet {
namespace {

constexpr int32_t kMaxBlock = 64;

// The row kernels of any type and level, through the dispatch table.
struct TableRows {
  const KvRowKernels& k;
  void scores(const float* q, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* s) const {
    k.scores(q, rows, sc, n, hd, s);
  }
  void accumulate(const float* p, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* out) const {
    k.accumulate(p, rows, sc, n, hd, out);
  }
};

// The f32 loops inlined, so the default (unquantized) path pays no indirect
// call per block; the same loops as the table's scalar f32 entry.
struct F32Rows {
  void scores(const float* q, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* s) const {
    kv_rows::scores<kv_rows::F32Row, KvType::F32>(q, rows, sc, n, hd, s);
  }
  void accumulate(const float* p, const uint8_t* rows, const uint16_t* sc, int32_t n, int32_t hd, float* out) const {
    kv_rows::accumulate<kv_rows::F32Row, KvType::F32>(p, rows, sc, n, hd, out);
  }
};

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The online softmax over [begin, end) from the state m (running max), l
// (sum of weights) and out (unnormalized weighted values) of each query head.
template <class Rows>
void attend_part(const Rows& rk, const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                 int32_t begin, int32_t end, AttnScale scale, float* m, float* l, float* out) {
  const size_t row_bytes = kv_row_bytes(kv.type, head_dim);
  const size_t n_scales = static_cast<size_t>(kv_row_scales(kv.type, head_dim));
  float s[kMaxBlock];

  for (int32_t start = begin; start < end;) {
    const int32_t in_block = start % kv.block_tokens;
    const int32_t len = std::min(kv.block_tokens - in_block, end - start);
    const size_t block = static_cast<size_t>(kv.block_ids[start / kv.block_tokens]);
    const uint8_t* kb = kv.k_base + block * kv.block_stride;
    const uint8_t* vb = kv.v_base + block * kv.block_stride;
    const uint8_t* k = kb + in_block * row_bytes;
    const uint8_t* v = vb + in_block * row_bytes;
    const auto* ks = reinterpret_cast<const uint16_t*>(kb + kv.scales_offset) + in_block * n_scales;
    const auto* vs = reinterpret_cast<const uint16_t*>(vb + kv.scales_offset) + in_block * n_scales;
    start += len;
    for (int32_t g = 0; g < n_group; ++g) {
      const float* qg = q + static_cast<size_t>(g) * head_dim;
      float* og = out + static_cast<size_t>(g) * head_dim;
      rk.scores(qg, k, ks, len, head_dim, s);
      float block_max = kNegInf;
      for (int32_t t = 0; t < len; ++t) {
        s[t] *= scale.scale;
        if (scale.softcap > 0.0f) s[t] = scale.softcap * std::tanh(s[t] / scale.softcap);
        block_max = std::max(block_max, s[t]);
      }
      const float new_max = std::max(m[g], block_max);
      const float correction = std::exp(m[g] - new_max);
      l[g] *= correction;
      for (int32_t d = 0; d < head_dim; ++d) og[d] *= correction;
      for (int32_t t = 0; t < len; ++t) {
        s[t] = std::exp(s[t] - new_max);  // now the weight p of token t
        l[g] += s[t];
      }
      rk.accumulate(s, v, vs, len, head_dim, og);
      m[g] = new_max;
    }
  }
}

void divide_by_sums(const float* l, int32_t n, int32_t head_dim, float* out) {
  for (int32_t g = 0; g < n; ++g) {
    const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    float* og = out + static_cast<size_t>(g) * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) og[d] *= inv;
  }
}

template <class Rows>
void attend(const Rows& rk, const float* q, int32_t n_group, int32_t head_dim,
            const PagedKv& kv, int32_t begin, int32_t end, AttnScale scale, float* out) {
  float m[kMaxAttnGroup], l[kMaxAttnGroup];
  std::fill(m, m + n_group, kNegInf);
  std::fill(l, l + n_group, 0.0f);
  std::fill(out, out + static_cast<size_t>(n_group) * head_dim, 0.0f);
  attend_part(rk, q, n_group, head_dim, kv, begin, end, scale, m, l, out);
  divide_by_sums(l, n_group, head_dim, out);
}

// The vector kernel, where the level has one and it takes this cache type,
// head dim and group (it says no by returning false).
bool vector_rows(const KernelSet& ks, const float* q, size_t q_stride, int32_t n_rows, int32_t n_group,
                 int32_t head_dim, const PagedKv& kv, const int32_t* begins, const int32_t* ends, AttnScale scale,
                 float* out, size_t out_stride) {
  const AttendRowsFn rows = ks.attend_rows();
  return rows && scale.softcap == 0.0f &&
         rows(q, q_stride, n_rows, n_group, head_dim, kv, begins, ends, scale.scale, out, out_stride);
}

bool attend_vector(const KernelSet& ks, const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                   int32_t begin, int32_t end, AttnScale scale, float* out) {
  return vector_rows(ks, q, 0, 1, n_group, head_dim, kv, &begin, &end, scale, out, 0);
}

// One part of a split decode: keys [begin, end) of every KV head into the
// part's state (m, l, out per query head, initialized here).
void decode_part(const KernelSet& ks, const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim,
                 const PagedKv& kv, size_t head_stride, int32_t begin, int32_t end, AttnScale scale, float* m,
                 float* l, float* out) {
  const int32_t nq = n_kv_heads * n_group;
  std::fill(m, m + nq, kNegInf);
  std::fill(l, l + nq, 0.0f);
  std::fill(out, out + static_cast<size_t>(nq) * head_dim, 0.0f);
  if (begin >= end) return;
  const AttendPartFn vector_part = ks.attend_part();
  if (vector_part && scale.softcap == 0.0f &&
      vector_part(q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale.scale, m, l, out))
    return;
  const size_t hd = static_cast<size_t>(head_dim);
  for (int32_t h = 0; h < n_kv_heads; ++h) {
    PagedKv head = kv;
    head.k_base += h * head_stride;
    head.v_base += h * head_stride;
    const size_t g0 = static_cast<size_t>(h) * n_group;
    const float* qh = q + g0 * hd;
    float* oh = out + g0 * hd;
    if (kv.type == KvType::F32)  // the table's f32 entry at every level is these loops
      attend_part(F32Rows{}, qh, n_group, head_dim, head, begin, end, scale, m + g0, l + g0, oh);
    else
      attend_part(TableRows{*ks.kv_rows(kv.type)}, qh, n_group, head_dim, head, begin, end, scale, m + g0, l + g0, oh);
  }
}

// Multiply-adds per part at least (about what a thread's wake-up is worth,
// as for the decoder's other jobs), so short contexts and tiny models stay
// on one thread.
constexpr int64_t kMinPartWork = int64_t{1} << 16;

int32_t blocks_between(int32_t begin, int32_t end, int32_t block_tokens) {
  return begin >= end ? 0 : (end + block_tokens - 1) / block_tokens - begin / block_tokens;
}

// Keys [begin, end) cut at block boundaries into n_parts parts of about
// equal size (empty ones where there are fewer blocks than parts); part p is
// [cuts[p], cuts[p + 1]).
void split_keys(int32_t begin, int32_t end, int32_t block_tokens, int32_t n_parts, int32_t* cuts) {
  const int32_t b0 = begin / block_tokens, n_blocks = blocks_between(begin, end, block_tokens);
  for (int32_t p = 0; p <= n_parts; ++p) {
    const int32_t b = b0 + static_cast<int32_t>(static_cast<int64_t>(n_blocks) * p / n_parts);
    cuts[p] = std::clamp(b * block_tokens, begin, std::max(begin, end));
  }
}

// out[i] = the parts' weighted values of query head i, each scaled by
// exp(its max - the overall max), over the likewise scaled sum of weights.
void merge_parts(int32_t n_parts, int32_t nq, int32_t head_dim, const float* m, const float* l, const float* parts,
                 float* out) {
  const size_t hd = static_cast<size_t>(head_dim);
  for (int32_t i = 0; i < nq; ++i) {
    float mx = kNegInf;
    for (int32_t p = 0; p < n_parts; ++p) mx = std::max(mx, m[p * nq + i]);
    float* o = out + i * hd;
    std::fill(o, o + hd, 0.0f);
    float sum = 0.0f;
    for (int32_t p = 0; p < n_parts; ++p) {
      const float lp = l[p * nq + i];
      if (lp == 0.0f) continue;  // no keys in this part
      const float c = std::exp(m[p * nq + i] - mx);
      sum += lp * c;
      const float* op = parts + (static_cast<size_t>(p) * nq + i) * hd;
      for (size_t d = 0; d < hd; ++d) o[d] += c * op[d];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (size_t d = 0; d < hd; ++d) o[d] *= inv;
  }
}

// The parts' states: m and l of every (part, query head), then their
// values, in a buffer of the calling thread's kept from step to step (a
// decode step calls this once per layer).
struct PartStates {
  float *m, *l, *out;
  PartStates(int32_t n_parts, int32_t nq, int32_t head_dim) {
    thread_local std::vector<float> buf;
    const size_t n = static_cast<size_t>(n_parts) * nq;
    buf.resize(std::max(buf.size(), n * (2 + static_cast<size_t>(head_dim))));
    m = buf.data();
    l = m + n;
    out = l + n;
  }
};

template <class RunParts>
void split_decode(const KernelSet& ks, int32_t n_parts, RunParts&& run_parts, const float* q, int32_t n_kv_heads,
                  int32_t n_group, int32_t head_dim, const PagedKv& kv, size_t head_stride, int32_t begin,
                  int32_t end, AttnScale scale, float* out) {
  n_parts = std::max(1, n_parts);
  thread_local std::vector<int32_t> cut_buf;
  cut_buf.resize(std::max(cut_buf.size(), static_cast<size_t>(n_parts) + 1));
  // The parts run on other threads, where cut_buf names their own vector.
  int32_t* cuts = cut_buf.data();
  split_keys(begin, end, kv.block_tokens, n_parts, cuts);
  const int32_t nq = n_kv_heads * n_group;
  const PartStates st(n_parts, nq, head_dim);
  run_parts(n_parts, [&](int32_t p) {
    const size_t at = static_cast<size_t>(p) * nq;
    decode_part(ks, q, n_kv_heads, n_group, head_dim, kv, head_stride, cuts[p], cuts[p + 1], scale, st.m + at,
                st.l + at, st.out + at * head_dim);
  });
  merge_parts(n_parts, nq, head_dim, st.m, st.l, st.out, out);
}

}  // namespace

void attend_paged_decode(ThreadPool& pool, const float* q, int32_t n_kv_heads, int32_t n_group, int32_t head_dim,
                         const PagedKv& kv, size_t head_stride, int32_t begin, int32_t end, AttnScale scale,
                         float* out) {
  // Two parts per thread: a thread the OS delays holds up half its share.
  const int64_t work = int64_t{std::max(0, end - begin)} * n_kv_heads * n_group * head_dim * 2;
  const auto n_parts = static_cast<int32_t>(
      std::min<int64_t>({2 * pool.size(), blocks_between(begin, end, kv.block_tokens), work / kMinPartWork}));
  const auto run = [&](int32_t n, const auto& part) {
    pool.parallel_for(n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) part(static_cast<int32_t>(p));
    });
  };
  split_decode(kernels(), n_parts, run, q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale,
               out);
}

void attend_paged_decode_at(CpuLevel level, int32_t n_parts, const float* q, int32_t n_kv_heads, int32_t n_group,
                            int32_t head_dim, const PagedKv& kv, size_t head_stride, int32_t begin, int32_t end,
                            AttnScale scale, float* out) {
  const auto run = [](int32_t n, const auto& part) {
    for (int32_t p = 0; p < n; ++p) part(p);
  };
  split_decode(kernels_at(level), n_parts, run, q, n_kv_heads, n_group, head_dim, kv, head_stride, begin, end, scale,
               out);
}

void attend_paged(const float* q, int32_t n_group, int32_t head_dim, const PagedKv& kv,
                  int32_t begin, int32_t end, AttnScale scale, float* out) {
  const KernelSet& ks = kernels();
  if (attend_vector(ks, q, n_group, head_dim, kv, begin, end, scale, out)) return;
  if (kv.type == KvType::F32) return attend(F32Rows{}, q, n_group, head_dim, kv, begin, end, scale, out);
  attend(TableRows{*ks.kv_rows(kv.type)}, q, n_group, head_dim, kv, begin, end, scale, out);
}

void attend_paged_at(CpuLevel level, const float* q, int32_t n_group, int32_t head_dim,
                     const PagedKv& kv, int32_t begin, int32_t end, AttnScale scale, float* out) {
  const KernelSet& ks = kernels_at(level);
  if (attend_vector(ks, q, n_group, head_dim, kv, begin, end, scale, out)) return;
  attend(TableRows{*ks.kv_rows(kv.type)}, q, n_group, head_dim, kv, begin, end, scale, out);
}

void attend_paged_rows(const float* q, size_t q_stride, int32_t n_rows, int32_t n_group, int32_t head_dim,
                       const PagedKv& kv, const int32_t* begins, const int32_t* ends, AttnScale scale, float* out,
                       size_t out_stride) {
  const KernelSet& ks = kernels();
  const int32_t tile = attn_tile_rows(n_group);
  for (int32_t r0 = 0; r0 < n_rows; r0 += tile) {
    const int32_t n = std::min(tile, n_rows - r0);
    const float* qr = q + static_cast<size_t>(r0) * q_stride;
    float* outr = out + static_cast<size_t>(r0) * out_stride;
    if (vector_rows(ks, qr, q_stride, n, n_group, head_dim, kv, begins + r0, ends + r0, scale, outr, out_stride))
      continue;
    for (int32_t r = 0; r < n; ++r)
      attend_paged(qr + static_cast<size_t>(r) * q_stride, n_group, head_dim, kv, begins[r0 + r], ends[r0 + r],
                   scale, outr + static_cast<size_t>(r) * out_stride);
  }
}

}  // namespace duet
