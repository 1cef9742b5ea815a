// Multi-head latent attention at long context (DeepSeek-V2-Lite's shape):
// the KV bytes per token of the latent cache against full K/V, and decode
// at a context of 8k tokens, (1) one decode step of a model with the real
// attention shape, absorbed path against the naive one (every cached latent
// decompressed by attn_kv_b each step), and (2) the attention kernel alone
// over the latent (1 KV row of 576, 16 query heads) against what full K/V
// caching reads (16 heads of 160 = (192 + 128) / 2, the same 5120 values a
// token). Prints numbers; asserts nothing.
//   mla_decode [context=8192] [threads=2] [steps=5]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kv_fill.h"
#include "formats/llama_synth.h"
#include "kernels/attention.h"
#include "kernels/roofline.h"
#include "kv/kv_cache.h"
#include "model/model.h"

using namespace duet;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds per attention call of n_q query heads per KV head over `ctx` keys.
double time_attention(const KvShape& shape, int32_t group, int32_t ctx, ThreadPool& pool, int reps) {
  KvCache cache(shape, blocks_for_tokens(ctx), KvType::F16);
  BlockTable table;
  if (!table.reserve(cache.pool(), ctx)) std::abort();
  bench::fill_kv(cache, table, ctx);
  const size_t hd = static_cast<size_t>(shape.head_dim), heads = static_cast<size_t>(shape.n_kv_heads) * group;
  std::vector<float> q(heads * hd, 0.1f), out(heads * hd);
  const int32_t begin = 0, end = ctx;
  const auto run = [&] {
    // As the decoder splits a decode step: KV heads (or groups of query heads) over the threads.
    const int32_t jobs = shape.n_kv_heads > 1 ? shape.n_kv_heads : pool.size();
    const int32_t per = shape.n_kv_heads > 1 ? group : group / pool.size();
    pool.parallel_for(jobs, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        const int32_t h = shape.n_kv_heads > 1 ? static_cast<int32_t>(j) : 0;
        const PagedKv kv{cache.key_data(0, 0, h), cache.value_data(0, 0, h), cache.block_stride(), table.blocks().data(),
                         kBlockTokens, cache.type(), cache.scales_offset()};
        const size_t off = static_cast<size_t>(j) * per * hd;
        attend_paged_rows(&q[off], heads * hd, 1, per, shape.head_dim, kv, &begin, &end, 0.07f, &out[off], heads * hd);
      }
    });
  };
  run();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) run();
  return seconds_since(t0) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const int32_t ctx = argc > 1 ? std::atoi(argv[1]) : 8192;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 5;
  ThreadPool pool(threads);

  auto lite = model_preset("deepseek-v2-lite");
  if (!lite.ok()) return 1;
  const KvShape latent{lite->n_layers, 1, lite->latent_dim(), true};
  const KvShape full_kv{lite->n_layers, lite->n_heads, (lite->head_dim + lite->v_head_dim) / 2};
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8}) {
    const size_t a = KvCache::bytes_per_token(latent, t), b = KvCache::bytes_per_token(full_kv, t);
    std::printf("KV bytes/token (27 layers, %s): latent %zu, full K/V %zu, %.2fx smaller\n",
                std::string(kv_type_name(t)).c_str(), a, b, static_cast<double>(b) / a);
  }

  // (2) The attention kernel alone, one layer, f16 cache, each against the
  // ceilings measured just before: per cached token the latent is 1152
  // bytes and 16 x (576 + 576) multiply-adds (the kernel takes the value
  // over the whole row), full K/V 10240 bytes and
  // 16 x (160 + 160).
  const Roofline roof = measure_roofline(pool, size_t{1} << 30, 1);
  const double t_lat = time_attention({1, 1, lite->latent_dim(), true}, lite->n_heads, ctx, pool, 20);
  const double t_full = time_attention({1, lite->n_heads, (lite->head_dim + lite->v_head_dim) / 2}, 1, ctx, pool, 20);
  std::printf("attention, one layer, %d keys, f16, %d threads: latent (MQA over 576) %.3f ms, full K/V (16 x 160) "
              "%.3f ms: %.2fx (bytes predict %.2fx)\n",
              ctx, threads, t_lat * 1e3, t_full * 1e3, t_full / t_lat,
              static_cast<double>(KvCache::bytes_per_token(full_kv, KvType::F16)) / KvCache::bytes_per_token(latent, KvType::F16));
  const auto rates = [&](const char* what, double seconds, double bytes, double madds) {
    const double gb_s = bytes * ctx / seconds / 1e9, gflop_s = 2 * madds * ctx / seconds / 1e9;
    std::printf("  %s: %.1f GB/s (%.0f%% of the read probe's %.1f), %.1f GFLOP/s (%.0f%% of the FMA probe's %.0f)\n", what,
                gb_s, 100 * gb_s / roof.read_gb_s, roof.read_gb_s, gflop_s, 100 * gflop_s / roof.fma_gflop_s,
                roof.fma_gflop_s);
  };
  const double heads = lite->n_heads;
  rates("latent", t_lat, 2.0 * lite->latent_dim(), heads * 2 * lite->latent_dim());
  rates("full K/V", t_full, 2.0 * 2 * heads * 160, heads * 2 * 160);

  // (1) A decode step of the real attention shape (2 layers: the dense one
  // and a routed one with 8 experts of 1408, top-6, small vocabulary).
  ModelConfig s = *lite;
  s.n_layers = 2;
  s.n_experts = 8;
  s.n_vocab = 1000;
  s.ctx_len = ctx + 16;
  const std::string path = "/tmp/duet-mla-bench.gguf";
  if (Status st = synth_model({.shape = s, .dtype = DType::F16, .seed = 1, .vocab_from = ""}, path); !st) {
    std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return 1;
  }
  auto m = Model::load(path);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.error().message.c_str());
    return 1;
  }
  std::remove(path.c_str());
  KvCache cache((*m)->kv_shape(), blocks_for_tokens(ctx + steps + 1), KvType::F16);
  BlockTable table;
  if (!table.reserve(cache.pool(), ctx + steps + 1)) return 1;
  bench::fill_kv(cache, table, ctx);
  std::vector<float> logits(static_cast<size_t>(s.n_vocab));
  for (bool naive : {false, true}) {
    (*m)->set_mla_naive(naive);
    double total = 0.0;
    for (int i = 0; i <= steps; ++i) {
      Batch b;
      const int32_t seq = b.add_sequence(&table);
      b.add(7, ctx, seq, true);
      const auto t0 = std::chrono::steady_clock::now();
      if (Status st = (*m)->forward(b, cache, pool, logits.data()); !st) return 1;
      if (i > 0) total += seconds_since(t0);  // the first warms up
    }
    std::printf("decode step at %d keys, 2 layers, f16 cache, %d threads: %s %.2f ms\n", ctx, threads,
                naive ? "naive (decompress every latent)" : "absorbed", total / steps * 1e3);
  }
  return 0;
}
