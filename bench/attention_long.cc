// Attention at long context against this machine's own ceilings, measured
// in the same run (issue 21 part 4). One layer of two shapes, Llama-2-7B's
// (32 KV heads of 128) and TinyLlama's GQA (4 KV heads of 64, 8 query heads
// each), at each cache type and context:
// - decode: one query row over `ctx` keys, split two ways: KV heads over
//   the threads (attend_paged_rows per head, as the decoder did), and the
//   keys over the threads with every head of a block in turn
//   (attend_paged_decode, as the decoder does now); judged as bytes of K/V
//   read per step (the cache's own bytes per token, scales included, times
//   ctx) over the read probe;
// - prefill: the last 512 rows of a prompt of `ctx` tokens (a chunk of
//   chunked prefill), in the decoder's tiles of 8 rows per KV head; judged as
//   FLOPs (4 per key per head dim per query head: q·k and p·v) over the FMA
//   peak.
// Prints a table and one JSON line per case; asserts nothing.
//   attention_long [threads=2] [contexts=4096,8192,16384,32768] [probe_mib=512] [kv=f16,q8,q4] [prefill=1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/roofline.h"
#include "kv/kv_cache.h"
#include "kv_fill.h"

using namespace duet;

namespace {

struct Shape {
  const char* name;
  int32_t kv_heads, group, head_dim;
};

constexpr int32_t kChunk = 512;  // prefill rows timed

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds per call of `run`, best of `reps` after a warm-up (the machine is
// shared: the best run is the one least disturbed).
template <typename F>
double best_time(F&& run, int reps) {
  run();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

struct Timings {
  double decode_s = 0, split_s = 0, prefill_s = 0;
};

Timings time_layer(const Shape& s, KvType type, int32_t ctx, bool prefill, ThreadPool& pool) {
  const KvShape shape{1, s.kv_heads, s.head_dim};
  KvCache cache(shape, blocks_for_tokens(ctx), type);
  BlockTable table;
  if (!table.reserve(cache.pool(), ctx)) std::abort();
  bench::fill_kv(cache, table, ctx);
  const int32_t q_dim = s.kv_heads * s.group * s.head_dim;
  const int32_t rows = std::min(kChunk, ctx);
  std::vector<float> q(static_cast<size_t>(rows) * q_dim, 0.05f), out(q.size());
  std::vector<int32_t> begins(static_cast<size_t>(rows), 0), ends(static_cast<size_t>(rows));
  for (int32_t r = 0; r < rows; ++r) ends[static_cast<size_t>(r)] = ctx - rows + r + 1;
  const float scale = 1.0f / 8.0f;
  // Rows [r0, r0 + n) of the chunk, KV heads and tiles over the threads.
  const auto attend = [&](int32_t r0, int32_t n) {
    const int32_t kTile = attn_tile_rows(s.group);  // the decoder's attention tile
    const int32_t tiles = (n + kTile - 1) / kTile;
    pool.parallel_for(static_cast<int64_t>(tiles) * s.kv_heads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t job = lo; job < hi; ++job) {
        const int32_t h = static_cast<int32_t>(job % s.kv_heads);
        const int32_t t0 = r0 + static_cast<int32_t>(job / s.kv_heads) * kTile, tn = std::min(kTile, r0 + n - t0);
        const PagedKv kv{cache.key_data(0, 0, h), cache.value_data(0, 0, h), cache.block_stride(),
                         table.blocks().data(), kBlockTokens, cache.type(), cache.scales_offset()};
        const size_t off = static_cast<size_t>(t0) * q_dim + static_cast<size_t>(h) * s.group * s.head_dim;
        attend_paged_rows(&q[off], q_dim, tn, s.group, s.head_dim, kv, &begins[static_cast<size_t>(t0)],
                          &ends[static_cast<size_t>(t0)], scale, &out[off], q_dim);
      }
    });
  };
  // One row over every KV head with the keys split over the threads.
  const auto attend_split = [&] {
    const PagedKv kv{cache.key_data(0, 0, 0), cache.value_data(0, 0, 0), cache.block_stride(),
                     table.blocks().data(), kBlockTokens, cache.type(), cache.scales_offset()};
    const size_t off = static_cast<size_t>(rows - 1) * q_dim;
    attend_paged_decode(pool, &q[off], s.kv_heads, s.group, s.head_dim, kv, cache.head_stride(), begins.back(),
                        ends.back(), scale, &out[off]);
  };
  Timings t;
  t.decode_s = best_time([&] { attend(rows - 1, 1); }, ctx >= 16384 ? 10 : 20);
  t.split_s = best_time(attend_split, ctx >= 16384 ? 10 : 20);
  if (prefill) t.prefill_s = best_time([&] { attend(0, rows); }, 2);
  return t;
}

std::vector<std::string> split(const char* s) {
  std::vector<std::string> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(item);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  std::vector<int32_t> contexts;
  for (const std::string& c : split(argc > 2 ? argv[2] : "4096,8192,16384,32768")) contexts.push_back(std::atoi(c.c_str()));
  const size_t probe_mib = argc > 3 ? static_cast<size_t>(std::atoi(argv[3])) : 512;
  std::vector<KvType> types;
  for (const std::string& t : split(argc > 4 ? argv[4] : "f16,q8,q4")) {
    auto parsed = parse_kv_type(t);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.error().message.c_str());
      return 2;
    }
    types.push_back(*parsed);
  }
  const bool prefill = argc > 5 ? std::atoi(argv[5]) != 0 : true;
  ThreadPool pool(threads);
  const Shape shapes[] = {{"llama2-7b (32 x 128)", 32, 1, 128}, {"tinyllama (4 x 64, GQA 8)", 4, 8, 64}};
  std::printf("| shape | kv | ctx | decode ms | KV GB/s | %% of read | split decode ms | KV GB/s | %% of read "
              "| prefill %d rows ms | GFLOP/s | %% of FMA |\n",
              kChunk);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes)
    for (KvType type : types)
      for (int32_t ctx : contexts) {
        // Probes beside each case: this machine's bandwidth moves minute to minute.
        const Roofline roof = measure_roofline(pool, probe_mib << 20, 2);
        const Timings t = time_layer(s, type, ctx, prefill, pool);
        const double kv_bytes = static_cast<double>(KvCache::bytes_per_token({1, s.kv_heads, s.head_dim}, type)) * ctx;
        const double gb_s = kv_bytes / t.decode_s / 1e9, split_gb_s = kv_bytes / t.split_s / 1e9;
        const int32_t rows = std::min(kChunk, ctx);
        double keys = 0;  // keys attended over the chunk's rows
        for (int32_t r = 0; r < rows; ++r) keys += ctx - rows + r + 1;
        const double flops = 4.0 * keys * s.head_dim * s.kv_heads * s.group;
        const double gflop_s = prefill ? flops / t.prefill_s / 1e9 : 0.0;
        const std::string kv(kv_type_name(type));
        std::printf("| %s | %s | %d | %.3f | %.1f | %.0f %% | %.3f | %.1f | %.0f %% | %.1f | %.1f | %.0f %% |\n",
                    s.name, kv.c_str(), ctx, t.decode_s * 1e3, gb_s, 100.0 * gb_s / roof.read_gb_s, t.split_s * 1e3,
                    split_gb_s, 100.0 * split_gb_s / roof.read_gb_s, t.prefill_s * 1e3, gflop_s,
                    100.0 * gflop_s / roof.fma_gflop_s);
        std::printf("{\"shape\":\"%s\",\"kv\":\"%s\",\"ctx\":%d,\"threads\":%d,\"decode_s\":%.6g,\"kv_bytes\":%.0f,"
                    "\"kv_gb_s\":%.4g,\"split_decode_s\":%.6g,\"split_kv_gb_s\":%.4g,\"read_gb_s\":%.4g,\"prefill_rows\":%d,\"prefill_s\":%.6g,\"prefill_gflop_s\":%.4g,"
                    "\"fma_gflop_s\":%.4g}\n",
                    s.name, kv.c_str(), ctx, pool.size(), t.decode_s, kv_bytes, gb_s, t.split_s, split_gb_s, roof.read_gb_s, rows, t.prefill_s,
                    gflop_s, roof.fma_gflop_s);
        std::fflush(stdout);
      }
  return 0;
}
