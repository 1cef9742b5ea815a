// KV windows: StreamingLLM's sinks + recent window (blocks dropped, keys
// re-rotated to their new positions), and a model's own sliding window
// (blocks it can no longer see given back to the pool).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/engine.h"
#include "formats/llama_synth.h"
#include "engine/stories_model.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::load;
using testing::load_stories;
using testing::stories_path;

std::vector<int32_t> story_tokens(const Model& m, size_t n) {
  std::vector<int32_t> t = m.tokenizer().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play in the park with "
      "her friends. One day, she saw a big red ball under a tree. She ran to get it, but a dog "
      "took it first. Lily was sad, so her mom gave her a hug and they went home together.",
      true);
  EXPECT_GE(t.size(), n);
  t.resize(n);
  return t;
}

// Runs tokens at consecutive positions from `first_pos`; returns the logits of the last.
std::vector<float> feed(Model& m, KvCache& cache, BlockTable& table, const std::vector<int32_t>& tokens,
                        int32_t first_pos, ThreadPool& pool) {
  EXPECT_TRUE(table.reserve(cache.pool(), first_pos + static_cast<int32_t>(tokens.size())));
  Batch b;
  const int32_t s = b.add_sequence(&table);
  for (size_t i = 0; i < tokens.size(); ++i)
    b.add(tokens[i], first_pos + static_cast<int32_t>(i), s, i + 1 == tokens.size());
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  const Status st = m.forward(b, cache, pool, logits.data());
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return logits;
}

float max_diff(const float* a, const float* b, size_t n) {
  float worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// Dropping block 1 and shifting the later keys down 16 positions must give
// the keys those tokens get when computed at the new positions. Layer 0's
// K and V depend only on token and position, so there they must match a
// fresh run of the kept tokens exactly (up to rounding); the sink block
// matches in every layer.
TEST(KvWindow, ShiftedKeysEqualKeysComputedAtTheNewPositions) {
  auto m = load(stories_path());
  ASSERT_TRUE(m);
  ThreadPool pool(1);
  const std::vector<int32_t> t = story_tokens(*m, 60);
  std::vector<int32_t> kept(t.begin(), t.begin() + 16);
  kept.insert(kept.end(), t.begin() + 32, t.end());

  KvCache a(m->kv_shape(), 8), fresh(m->kv_shape(), 8), unshifted(m->kv_shape(), 8);
  BlockTable ta, tf, tu;
  feed(*m, a, ta, t, 0, pool);
  ta.erase(a.pool(), 1, 1);
  m->shift_keys(a, ta, 16, 44, -16, pool);
  feed(*m, fresh, tf, kept, 0, pool);
  feed(*m, unshifted, tu, t, 0, pool);
  tu.erase(unshifted.pool(), 1, 1);

  const KvShape& shape = m->kv_shape();
  const auto row = static_cast<size_t>(shape.head_dim);
  std::vector<float> k(row), kf(row), ku(row), v(row), vf(row);
  float k0 = 0, v0 = 0, sinks = 0, moved = 0;
  for (int32_t layer = 0; layer < shape.n_layers; ++layer)
    for (int32_t h = 0; h < shape.n_kv_heads; ++h)
      for (int32_t pos = 0; pos < 44; ++pos) {
        const int32_t slot = pos % kBlockTokens;
        const auto b = static_cast<size_t>(pos / kBlockTokens);
        a.load_key(layer, ta.blocks()[b], h, slot, k.data());
        fresh.load_key(layer, tf.blocks()[b], h, slot, kf.data());
        if (pos < 16) sinks = std::max(sinks, max_diff(k.data(), kf.data(), row));
        if (layer != 0) continue;
        k0 = std::max(k0, max_diff(k.data(), kf.data(), row));
        a.load_value(0, ta.blocks()[b], h, slot, v.data());
        fresh.load_value(0, tf.blocks()[b], h, slot, vf.data());
        v0 = std::max(v0, max_diff(v.data(), vf.data(), row));
        unshifted.load_key(0, tu.blocks()[b], h, slot, ku.data());
        if (pos >= 16) moved = std::max(moved, max_diff(ku.data(), kf.data(), row));
      }
  EXPECT_LT(k0, 1e-5f);
  EXPECT_EQ(v0, 0.0f);
  EXPECT_EQ(sinks, 0.0f);
  EXPECT_GT(moved, 1e-2f);  // without the shift the keys are wrong

  // The next token's logits after a shift are finite and differ from the
  // unshifted cache's (the rotation reaches the output).
  const std::vector<float> after = feed(*m, a, ta, {t[10]}, 44, pool);
  const std::vector<float> wrong = feed(*m, unshifted, tu, {t[10]}, 44, pool);
  EXPECT_TRUE(std::all_of(after.begin(), after.end(), [](float x) { return std::isfinite(x); }));
  EXPECT_GT(max_diff(after.data(), wrong.data(), after.size()), 1e-3f);
}

struct Generated {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int32_t peak_blocks = 0;
  EngineMetrics metrics;
};

Generated generate(Model& m, const EngineConfig& cfg, const std::vector<int32_t>& prompt, int32_t n) {
  Engine engine(m, cfg);
  Generated r;
  RequestParams p;
  p.sampling = SamplingParams::greedy();
  p.max_tokens = n;
  p.ignore_eos = true;
  auto id = engine.submit(prompt, p, [&](const TokenEvent& ev) {
    r.peak_blocks = std::max(r.peak_blocks, engine.cache().pool().n_used());
    if (ev.token >= 0) r.tokens.push_back(ev.token);
    if (ev.finished) r.reason = ev.reason;
  });
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  const Status st = engine.run_until_idle();
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  r.metrics = engine.metrics();
  return r;
}

// Four times the context, in the memory of sinks + window: the output is
// the plain output until the first block is dropped.
TEST(KvWindow, GenerationRunsFourContextsInBoundedMemory) {
  auto m = load(stories_path());
  ASSERT_TRUE(m);
  const std::vector<int32_t> prompt = m->tokenizer().encode("Once upon a time", true);
  EngineConfig plain;
  plain.n_threads = 1;
  plain.ctx = 128;
  const Generated base = generate(*m, plain, prompt, 200);
  EXPECT_EQ(base.reason, FinishReason::kContext);

  EngineConfig win = plain;
  win.kv_window = 64;
  win.kv_sinks = 4;
  const Generated r = generate(*m, win, prompt, 4 * 128);
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 512u);
  // One sink block, the window's 4, and the blocks still filling.
  EXPECT_LE(r.peak_blocks, 1 + 4 + 2);
  EXPECT_GE(r.metrics.kv_evicted_tokens, 512 - 128);
  // The first block is dropped once sinks (16) + window (64) + 16 tokens are cached.
  const size_t same = 96 - prompt.size() - 1;
  ASSERT_GE(base.tokens.size(), same);
  EXPECT_TRUE(std::equal(base.tokens.begin(), base.tokens.begin() + static_cast<std::ptrdiff_t>(same), r.tokens.begin()));
}

// The shift goes through the cache's format: a quantized window works too.
TEST(KvWindow, QuantizedKeysAreShiftedThroughTheirFormat) {
  auto m = load(stories_path());
  ASSERT_TRUE(m);
  const std::vector<int32_t> prompt = m->tokenizer().encode("Once upon a time", true);
  EngineConfig cfg;
  cfg.n_threads = 1;
  cfg.ctx = 128;
  cfg.kv_type = KvType::Q8;
  const Generated plain = generate(*m, cfg, prompt, 90);
  cfg.kv_window = 64;
  const Generated r = generate(*m, cfg, prompt, 400);
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 400u);
  EXPECT_LE(r.peak_blocks, 1 + 4 + 2);
  const size_t same = 96 - prompt.size() - 1;
  EXPECT_TRUE(std::equal(plain.tokens.begin(), plain.tokens.begin() + static_cast<std::ptrdiff_t>(same), r.tokens.begin()));
}

TEST(KvWindow, APromptLongerThanTheContextIsPrefilledAWindowAtATime) {
  auto m = load(stories_path());
  ASSERT_TRUE(m);
  std::vector<int32_t> prompt = story_tokens(*m, 60);
  for (int i = 0; i < 2; ++i) prompt.insert(prompt.end(), prompt.begin() + 1, prompt.begin() + 60);
  EngineConfig win;
  win.n_threads = 1;
  win.ctx = 96;
  win.kv_window = 32;
  const Generated r = generate(*m, win, prompt, 40);
  EXPECT_GT(prompt.size(), 96u);
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 40u);
}

// n greedy tokens after `prompt` from a plain forward loop over one table
// in an ample cache (32 blocks): what the engine must reproduce.
std::vector<int32_t> greedy_reference(Model& m, const std::vector<int32_t>& prompt, int n) {
  ThreadPool pool(1);
  KvCache cache(with_one_table(m.kv_shape()), 32);
  BlockTable table;
  std::vector<int32_t> reference, seq = prompt;
  std::vector<float> logits = feed(m, cache, table, prompt, 0, pool);
  for (int i = 0; i < n; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    reference.push_back(next);
    logits = feed(m, cache, table, {next}, static_cast<int32_t>(seq.size()), pool);
    seq.push_back(next);
  }
  return reference;
}

// A model with a 32-token sliding window gives back the blocks it can no
// longer see: 200 tokens run in a 6-block pool, with the text a plain
// forward loop over an ample cache produces.
TEST(KvWindow, ModelSlidingWindowReleasesBlocksOutOfReach) {
  testing::TempDir dir;
  SynthOptions o;
  o.shape = {.name = "windowed", .dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .ffn_dim = 192,
             .ctx_len = 512, .sliding_window = 32};
  o.seed = 9;
  o.vocab_from = stories_path();
  ASSERT_TRUE(synth_model(o, dir.file("w.gguf")).ok());
  auto m = load(dir.file("w.gguf"));
  ASSERT_TRUE(m);
  ASSERT_EQ(m->config().sliding_window, 32);
  const std::vector<int32_t> prompt = m->tokenizer().encode("Once upon a time", true);

  const std::vector<int32_t> reference = greedy_reference(*m, prompt, 200);

  EngineConfig cfg;
  cfg.n_threads = 1;
  cfg.n_kv_blocks = 6;
  const Generated r = generate(*m, cfg, prompt, 200);
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens, reference);
  EXPECT_LE(r.peak_blocks, 4);
}

}  // namespace
}  // namespace duet

namespace duet {
namespace {

// Gemma 2's pattern (every other layer slides over 32 tokens): the sliding
// layers' blocks are freed behind their window while the global layers
// keep all of theirs. 200 tokens give the text of a plain forward loop in
// less KV memory than one table for every layer holds, and a second
// request with the same prompt reuses its cached prefix in every group.
TEST(KvWindow, SlidingLayersOfAMixedModelFreeTheirBlocksAlone) {
  testing::TempDir dir;
  SynthOptions o;
  o.shape = {.arch = Arch::kGemma2, .name = "mixed", .dim = 64, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2,
             .head_dim = 16, .ffn_dim = 96, .ctx_len = 512, .sliding_window = 32, .tied_output = true};
  o.seed = 5;
  o.vocab_from = stories_path();
  const Status made = synth_model(o, dir.file("g.gguf"));
  ASSERT_TRUE(made.ok()) << made.error().message;
  auto m = load(dir.file("g.gguf"));
  ASSERT_TRUE(m);
  ASSERT_EQ(m->kv_shape().n_groups(), 2);
  const std::vector<int32_t> prompt = story_tokens(*m, 40);

  const std::vector<int32_t> reference = greedy_reference(*m, prompt, 200);

  EngineConfig grouped;
  grouped.n_threads = 1;
  EngineConfig one = grouped;
  one.kv_layer_groups = false;
  const Generated g = generate(*m, grouped, prompt, 200), single = generate(*m, one, prompt, 200);
  EXPECT_EQ(g.tokens, reference);
  EXPECT_EQ(single.tokens, reference);
  // 240 tokens fill 15 blocks. One table's blocks hold 4 layers; grouped
  // blocks hold 2: 15 for the global layers and, for the sliding ones,
  // the window's 2 with the step's and the partial ones.
  EXPECT_EQ(single.peak_blocks, 15);
  EXPECT_LE(g.peak_blocks, 15 + 4);
  EXPECT_LT(g.peak_blocks * 2, single.peak_blocks * 4);  // in layer-blocks: bytes

  // Two requests, one after the other, on one engine: the second finds the
  // first's prompt blocks in both groups.
  Engine engine(*m, grouped);
  std::vector<std::vector<int32_t>> outs(2);
  for (int r = 0; r < 2; ++r) {
    RequestParams p;
    p.sampling = SamplingParams::greedy();
    p.max_tokens = 20;
    p.ignore_eos = true;
    ASSERT_TRUE(engine.submit(prompt, p, [&outs, r](const TokenEvent& ev) {
      if (ev.token >= 0) outs[static_cast<size_t>(r)].push_back(ev.token);
    }).ok());
    ASSERT_TRUE(engine.run_until_idle().ok());
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], std::vector<int32_t>(reference.begin(), reference.begin() + 20));
  EXPECT_EQ(engine.metrics().prefix_hit_tokens, 2 * kBlockTokens);
}

}  // namespace
}  // namespace duet
