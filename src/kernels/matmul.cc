// matmul: every projection of the forward pass, decode (m = 1) and prefill
// (m > 1) alike. Output rows are split across threads; within a thread the
// weight rows are taken in tiles that stay in L2 while every token streams
// past them, so a prefill chunk reads its weights from memory once, not once
// per token.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "core/quant_blocks.h"
#include "kernels/ops.h"
#include "kernels/registry.h"

namespace duet {
namespace {

// A quarter of a 1 MiB L2: room for the tile plus the activations streaming by.
constexpr size_t kTileBytes = 256 << 10;
constexpr int64_t kRowGrain = 16;
// Ranges per thread of a one-token matmul: few enough that handing them out
// costs little, enough that a delayed thread does not hold up the others.
constexpr int64_t kDecodeRangesPerThread = 8;
// The packed path's guided split (ThreadPool::parallel_for_guided): up to
// this many tokens, in units of this many rows.
constexpr int64_t kGuidedMaxTokens = 16;
constexpr int64_t kGuidedUnitRows = 32;

// Rows per tile, from the bytes of each row the kernel holds at a time.
int64_t tile_rows(size_t row_bytes) {
  const int64_t rows = static_cast<int64_t>(kTileBytes / (row_bytes ? row_bytes : 1));
  return rows < kRowGrain ? kRowGrain : rows - rows % kRowGrain;
}

// Rows per parallel_for range: a whole tile when several tokens reuse it (so
// each range reads its weights once), but small enough that every thread
// gets several ranges to balance the load.
int64_t row_grain(int64_t n_out, int64_t m, int64_t rows_per_tile, int n_threads) {
  // One token: kDecodeRangesPerThread ranges per thread. Each range costs a
  // cross-core atomic and a fresh prefetch stream, so 16-row ranges (352 for
  // an FFN matrix) hold 2-thread TinyLlama Q4_0 decode ~30 % below 8 ranges
  // per thread (docs/performance.md).
  if (m == 1) {
    int64_t g = (n_out + kDecodeRangesPerThread * n_threads - 1) / (kDecodeRangesPerThread * n_threads);
    return (g + kRowGrain - 1) / kRowGrain * kRowGrain;
  }
  int64_t g = (n_out + 4 * n_threads - 1) / (4 * n_threads);
  g = (g + kRowGrain - 1) / kRowGrain * kRowGrain;
  return g < rows_per_tile ? g : rows_per_tile;
}

[[noreturn]] void no_kernels(const TensorView& w) {
  // The model loader checks every weight type; reaching here is a bug.
  std::fprintf(stderr, "matmul: no kernels for %s weight '%s'\n",
               std::string(dtype_name(w.dtype)).c_str(), w.name.c_str());
  std::abort();
}

// Bytes of one activation row in the weight's vec_dot_type; 0 when x is used as is.
size_t act_row_bytes(const TypeKernels& tk, int64_t k) {
  if (tk.vec_dot_type == DType::F32) return 0;
  const Result<size_t> b = row_bytes(tk.vec_dot_type, k);
  return b.ok() ? *b : 0;
}

// x in tk's vec_dot_type: converted into scratch, or x itself where that
// is F32. Its rows are *x_stride bytes apart.
const uint8_t* convert_for(const TypeKernels& tk, const float* x, int64_t k, int64_t m, void* scratch,
                           ThreadPool& pool, size_t* x_stride) {
  const size_t x_bytes = act_row_bytes(tk, k);  // per converted row
  if (!x_bytes) {
    *x_stride = static_cast<size_t>(k) * sizeof(float);
    return reinterpret_cast<const uint8_t*>(x);
  }
  auto* out = static_cast<uint8_t*>(scratch);  // [m][x_bytes]
  pool.parallel_for(m, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) tk.from_float(x + t * k, out + t * x_bytes, k);
  });
  *x_stride = x_bytes;
  return out;
}

// x in the packed int8 kernels' form, interleaved by block (block stride
// m * sizeof(PackedActBlock)), in scratch.
const uint8_t* quantize_for(const PackedKernels& pk, const float* x, int64_t k, int64_t m, void* scratch,
                            ThreadPool& pool) {
  auto* xq = static_cast<uint8_t*>(scratch);
  const size_t block_stride = static_cast<size_t>(m) * sizeof(PackedActBlock);
  pool.parallel_for(m, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) pk.quantize(x + t * k, xq + t * sizeof(PackedActBlock), k, pk.offset, block_stride);
  });
  return xq;
}

// Packed weights of one dtype and width, read as one matrix of all their rows.
struct PackedSet {
  std::span<const TensorView* const> ws;
  std::span<float* const> ys;
  const PackedKernels* pk;

  int64_t rows() const {
    int64_t n = 0;
    for (const TensorView* w : ws) n += w->ne[1];
    return n;
  }
  // Rows [r0, r1) of the stacked matrices, in tiles, each within one matrix.
  void run(int64_t r0, int64_t r1, int64_t rows_per_tile, const uint8_t* xs, size_t x_bytes, int64_t m) const {
    const int64_t k = ws[0]->ne[0];
    int64_t base = 0;
    for (size_t i = 0; i < ws.size() && base < r1; base += ws[i]->ne[1], ++i) {
      const int64_t n_out = ws[i]->ne[1];
      const int64_t b0 = std::max(r0, base) - base, b1 = std::min(r1, base + n_out) - base;
      const size_t group_bytes = packed_bytes(*ws[i]) / static_cast<size_t>(n_out / kPackRows);
      for (int64_t b = b0; b < b1; b += rows_per_tile) {
        const int64_t e = b1 - b < rows_per_tile ? b1 : b + rows_per_tile;
        pk->gemm(k, static_cast<const uint8_t*>(ws[i]->data) + b / kPackRows * group_bytes, (e - b) / kPackRows,
                 xs, x_bytes, m, ys[i] + b, n_out);
      }
    }
  }
};

// A packed weight (kernels/packed_gemm.h), or several of one dtype sharing
// x: activations in the kernel's own form once, then 16-row groups of all
// the matrices split across threads in one parallel region.
void matmul_packed(const PackedSet& set, const float* x, int64_t m, void* scratch, ThreadPool& pool) {
  const TensorView& w = *set.ws[0];
  const int64_t k = w.ne[0];
  const uint8_t* xs = reinterpret_cast<const uint8_t*>(x);
  size_t x_bytes = static_cast<size_t>(k) * sizeof(float);
  if (set.pk->offset != kFloatActs) {
    xs = quantize_for(*set.pk, x, k, m, scratch, pool);
    x_bytes = static_cast<size_t>(m) * sizeof(PackedActBlock);  // the block stride
  }
  const size_t group_bytes = packed_bytes(w) / static_cast<size_t>(w.ne[1] / kPackRows);
  const int64_t rows_per_tile = tile_rows(group_bytes / kPackRows);
  const int64_t n_rows = set.rows();
  const auto run = [&](int64_t r0, int64_t r1) { set.run(r0, r1, rows_per_tile, xs, x_bytes, m); };
  // Decode and batches of up to 16 stream the matrix once, memory-bound:
  // shrinking ranges, which cut the time threads wait for the last one at the
  // end of a matmul (~4 % of a Q8_0 decode's kernel time, ~5.5 % with even
  // ranges). Longer batches keep whole tiles per range.
  if (m <= kGuidedMaxTokens) return pool.parallel_for_guided(n_rows, kGuidedUnitRows, run);
  pool.parallel_for(n_rows, row_grain(n_rows, m, rows_per_tile, pool.size()), run);
}

// Items' rows as one range [0, sum of rows), each item's activations in
// the kernel's form (xs[i], block stride x_bytes[i]).
struct GroupedSet {
  std::span<const MatmulItem> items;
  std::vector<const uint8_t*>& xs;
  std::vector<size_t>& x_bytes;
  const PackedKernels* pk;
  int64_t rows_per_tile;

  void run(int64_t r0, int64_t r1) const {
    int64_t base = 0;
    for (size_t i = 0; i < items.size() && base < r1; base += items[i].w->ne[1], ++i) {
      const TensorView& w = *items[i].w;
      const int64_t n_out = w.ne[1];
      if (base + n_out <= r0) continue;
      const int64_t b0 = std::max(r0, base) - base, b1 = std::min(r1, base + n_out) - base;
      const size_t group_bytes = packed_bytes(w) / static_cast<size_t>(n_out / kPackRows);
      for (int64_t b = b0; b < b1; b += rows_per_tile) {
        const int64_t e = b1 - b < rows_per_tile ? b1 : b + rows_per_tile;
        pk->gemm(w.ne[0], static_cast<const uint8_t*>(w.data) + b / kPackRows * group_bytes, (e - b) / kPackRows,
                 xs[i], x_bytes[i], items[i].m, items[i].y + b, n_out);
      }
    }
  }
};

// Activations to quantize: m rows of x into out, the rows [first, first +
// m) of all of a grouped matmul's together. Interleaved by block as the
// kernels read them, or row after row (a source whose blocks are gathered).
struct ActRows {
  const float* x;
  int64_t m;
  uint8_t* out;
  int64_t first;
  bool row_major = false;
};

// The one of `all` (sorted by first, each m rows from first) holding row r.
template <class G>
const G* holding(std::span<const G> all, int64_t r) {
  return &*(std::upper_bound(all.begin(), all.end(), r, [](int64_t v, const G& g) { return v < g.first; }) - 1);
}

// Every item's activations in one parallel region over all their rows: a
// prefill chunk's 128 experts each quantized in a region of its own made
// 256 thread hand-offs per layer, and on a busy machine every hand-off can
// wait out a descheduled thread. Rows of ~32 k floats per range, so a
// decode step's few short rows stay on the calling thread.
void quantize_grouped(const PackedKernels& pk, std::span<const ActRows> acts, int64_t total, int64_t k,
                      ThreadPool& pool) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / k);
  const size_t row_bytes = packed_act_row_bytes(k);
  pool.parallel_for(total, grain, [&](int64_t r0, int64_t r1) {
    const ActRows* a = holding(acts, r0);  // then onwards
    for (int64_t r = r0; r < r1; ++r) {
      while (r >= a->first + a->m) ++a;
      const int64_t t = r - a->first;
      if (a->row_major)
        pk.quantize(a->x + t * k, a->out + static_cast<size_t>(t) * row_bytes, k, pk.offset, sizeof(PackedActBlock));
      else
        pk.quantize(a->x + t * k, a->out + t * sizeof(PackedActBlock), k, pk.offset,
                    static_cast<size_t>(a->m) * sizeof(PackedActBlock));
    }
  });
}

// An item's picked rows of a quantized source (row after row), interleaved
// by block into out; rows [first, first + m) of all the gathers together.
struct Gather {
  const uint8_t* source;
  const int32_t* rows;
  int64_t m;
  uint8_t* out;
  int64_t first;
};

void gather_blocks(std::span<const Gather> gathers, int64_t total, int64_t k, ThreadPool& pool) {
  const int64_t nb = k / kQK32;
  const size_t row_bytes = packed_act_row_bytes(k);
  pool.parallel_for(total, std::max<int64_t>(1, (int64_t{1} << 15) / k), [&](int64_t r0, int64_t r1) {
    const Gather* g = holding(gathers, r0);
    for (int64_t r = r0; r < r1; ++r) {
      while (r >= g->first + g->m) ++g;
      const int64_t t = r - g->first;
      const auto* from = reinterpret_cast<const PackedActBlock*>(g->source + static_cast<size_t>(g->rows[t]) * row_bytes);
      auto* to = reinterpret_cast<PackedActBlock*>(g->out) + t;
      for (int64_t b = 0; b < nb; ++b) to[b * g->m] = from[b];
    }
  });
}

// An item's picked float rows, copied out to `out`.
struct FloatPick {
  const float* x;
  const int32_t* rows;
  int64_t m;
  float* out;
  int64_t first;
};

// Items that pick rows, for the kernels that take x as floats (or no packed
// set): the picked rows copied out, then the items as if given so.
void matmul_grouped_floats(std::span<const MatmulItem> items, void* scratch, ThreadPool& pool) {
  thread_local std::vector<float> picked;
  thread_local std::vector<MatmulItem> flat;
  thread_local std::vector<FloatPick> picks;
  const int64_t k = items[0].w->ne[0];
  int64_t total = 0;
  for (const MatmulItem& it : items) total += it.rows ? it.m : 0;
  picked.resize(static_cast<size_t>(total * k));
  flat.assign(items.begin(), items.end());
  picks.clear();
  for (MatmulItem& it : flat) {
    if (!it.rows) continue;
    const int64_t first = picks.empty() ? 0 : picks.back().first + picks.back().m;
    picks.push_back({it.x, it.rows, it.m, picked.data() + first * k, first});
    it.x = picks.back().out;
    it.rows = nullptr;
  }
  // The workers see the calling thread's picks through this span (by name
  // they would see their own, empty, thread_local).
  const std::span<const FloatPick> all(picks);
  pool.parallel_for(total, std::max<int64_t>(1, (int64_t{1} << 15) / k), [&](int64_t r0, int64_t r1) {
    const FloatPick* p = holding(all, r0);
    for (int64_t r = r0; r < r1; ++r) {
      while (r >= p->first + p->m) ++p;
      const int64_t t = r - p->first;
      std::copy_n(p->x + static_cast<int64_t>(p->rows[t]) * k, k, p->out + t * k);
    }
  });
  matmul_grouped(flat, scratch, pool);
}

}  // namespace

size_t grouped_scratch_bytes(const TensorView& w, int64_t total_m, int64_t source_rows) {
  return activation_scratch_bytes(w, total_m + source_rows);
}

void matmul_grouped(std::span<const MatmulItem> items, void* scratch, ThreadPool& pool) {
  if (items.empty()) return;
  const TensorView& w0 = *items[0].w;
  const bool one_set = std::all_of(items.begin(), items.end(), [&](const MatmulItem& it) {
    return it.w->packed && it.w->dtype == w0.dtype && it.w->ne[0] == w0.ne[0] && it.w->ne[0] > 0 && it.m > 0;
  });
  const PackedKernels* pk = one_set ? kernels().packed(w0.dtype) : nullptr;
  const bool picks = std::any_of(items.begin(), items.end(), [](const MatmulItem& it) { return it.rows; });
  if (picks && (!pk || pk->offset == kFloatActs)) return matmul_grouped_floats(items, scratch, pool);
  if (!pk) {
    for (const MatmulItem& it : items) matmul(*it.w, it.x, it.m, it.y, scratch, pool);
    return;
  }
  const int64_t k = w0.ne[0];
  const size_t row_bytes = packed_act_row_bytes(k);
  // Kept per thread between calls: a decode step makes two per MoE layer.
  thread_local std::vector<const uint8_t*> xs;
  thread_local std::vector<size_t> x_bytes;
  thread_local std::vector<ActRows> acts;
  thread_local std::vector<Gather> gathers;
  xs.clear();
  x_bytes.clear();
  acts.clear();
  gathers.clear();
  GroupedSet set{items, xs, x_bytes, pk, 0};
  auto* out = static_cast<uint8_t*>(scratch);
  int64_t max_m = 0, n_rows = 0, act_rows = 0, gathered = 0;
  // The quantized source of rows picked from x: quantized once, whole.
  const auto source_of = [&](const MatmulItem& it) -> const uint8_t* {
    for (const ActRows& a : acts)
      if (a.row_major && a.x == it.x) return a.out;
    acts.push_back({it.x, it.x_rows, out, act_rows, true});
    act_rows += it.x_rows;
    out += row_bytes * static_cast<size_t>(it.x_rows);
    return acts.back().out;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const MatmulItem& it = items[i];
    max_m = std::max(max_m, it.m);
    n_rows += it.w->ne[1];
    if (pk->offset == kFloatActs) {
      set.xs.push_back(reinterpret_cast<const uint8_t*>(it.x));
      set.x_bytes.push_back(static_cast<size_t>(k) * sizeof(float));
      continue;
    }
    if (i > 0 && it.x == items[i - 1].x && it.m == items[i - 1].m && it.rows == items[i - 1].rows) {
      set.xs.push_back(set.xs.back());
      set.x_bytes.push_back(set.x_bytes.back());
      continue;
    }
    if (it.rows) {
      gathers.push_back({source_of(it), it.rows, it.m, out, gathered});
      gathered += it.m;
    } else {
      acts.push_back({it.x, it.m, out, act_rows});
      act_rows += it.m;
    }
    set.xs.push_back(out);
    set.x_bytes.push_back(static_cast<size_t>(it.m) * sizeof(PackedActBlock));
    out += row_bytes * static_cast<size_t>(it.m);
  }
  quantize_grouped(*pk, acts, act_rows, k, pool);
  if (gathered > 0) gather_blocks(gathers, gathered, k, pool);
  const size_t group_bytes = packed_bytes(w0) / static_cast<size_t>(w0.ne[1] / kPackRows);
  set.rows_per_tile = tile_rows(group_bytes / kPackRows);
  const auto run = [&](int64_t r0, int64_t r1) { set.run(r0, r1); };
  if (max_m <= kGuidedMaxTokens) return pool.parallel_for_guided(n_rows, kGuidedUnitRows, run);
  pool.parallel_for(n_rows, row_grain(n_rows, max_m, set.rows_per_tile, pool.size()), run);
}

size_t activation_scratch_bytes(const TensorView& w, int64_t m) {
  const KernelSet& ks = kernels();
  if (w.packed) {
    const PackedKernels* pk = ks.packed(w.dtype);
    return pk && pk->offset != kFloatActs ? packed_act_row_bytes(w.ne[0]) * static_cast<size_t>(m) : 0;
  }
  const TypeKernels* tk = ks.type(w.dtype);
  return tk ? act_row_bytes(*tk, w.ne[0]) * static_cast<size_t>(m) : 0;
}

void matmul(const TensorView& w, const float* x, int64_t m, float* y, void* scratch,
            ThreadPool& pool) {
  const int64_t k = w.ne[0], n_out = w.ne[1];
  const size_t w_stride = w.row_stride();
  if (k == 0) {  // empty dots
    for (int64_t i = 0; i < m * n_out; ++i) y[i] = 0.0f;
    return;
  }

  const KernelSet& ks = kernels();
  if (w.packed) {
    const PackedKernels* pk = ks.packed(w.dtype);
    if (!pk) no_kernels(w);
    const TensorView* ws[] = {&w};
    float* ys[] = {y};
    return matmul_packed({ws, ys, pk}, x, m, scratch, pool);
  }

  const TypeKernels* tk = ks.type(w.dtype);
  if (!tk) no_kernels(w);
  // A tile holds the chunk of each of its rows that dot_block reads at a time.
  const size_t chunk_bytes = tk->k_chunk > 0 && tk->k_chunk < k ? w_stride / k * tk->k_chunk : w_stride;
  const int64_t rows_per_tile = tile_rows(chunk_bytes);
  const int64_t grain = row_grain(n_out, m, rows_per_tile, pool.size());
  size_t x_stride;
  const uint8_t* xs = convert_for(*tk, x, k, m, scratch, pool, &x_stride);
  pool.parallel_for(n_out, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t b = r0; b < r1; b += rows_per_tile) {
      const int64_t e = r1 - b < rows_per_tile ? r1 : b + rows_per_tile;
      if (tk->dot_block) {
        tk->dot_block(k, w.row(b), w_stride, e - b, xs, x_stride, m, y + b, n_out);
        continue;
      }
      for (int64_t t = 0; t < m; ++t)
        for (int64_t r = b; r < e; ++r) y[t * n_out + r] = tk->vec_dot(k, w.row(r), xs + t * x_stride);
    }
  });
}

void matmul_shared(std::span<const TensorView* const> ws, const float* x, int64_t m, std::span<float* const> ys,
                   void* scratch, ThreadPool& pool) {
  const TensorView& w0 = *ws[0];
  const bool one_set = std::all_of(ws.begin(), ws.end(), [&](const TensorView* w) {
    return w->packed && w->dtype == w0.dtype && w->ne[0] == w0.ne[0] && w->ne[0] > 0;
  });
  const PackedKernels* pk = one_set ? kernels().packed(w0.dtype) : nullptr;
  if (pk) return matmul_packed({ws, ys, pk}, x, m, scratch, pool);
  for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, m, ys[i], scratch, pool);
}

}  // namespace duet
