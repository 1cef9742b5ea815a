// Multi-head latent attention (DeepSeek-V2): the cache holds only the
// latent row per token; attention over it with the up-projections absorbed
// into the query and the output equals the naive path (every latent
// decompressed into each head's K and V, then ordinary attention) on the
// same inputs; a prompt in one batch equals it token by token; and the
// loader names the tensor a file's MLA shapes contradict.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/llama_synth.h"
#include "model/model.h"
#include "prompt_logits.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::relative_diff;

// Scaled down from DeepSeek-V2-Lite: heads of nope 16 + rope 8 for q and k,
// values of 16, a latent of 32; 8 experts top-2 beside 1 shared; layer 0 dense.
ModelConfig mla_shape(int32_t q_lora = 0) {
  return {.arch = Arch::kDeepseek2, .name = "mla", .n_vocab = 300, .dim = 64, .n_layers = 3, .n_heads = 4,
          .n_kv_heads = 4, .head_dim = 24, .ffn_dim = 96, .ctx_len = 256, .rope_dim = 8, .rms_eps = 1e-6f,
          .n_experts = 8, .n_experts_used = 2, .expert_ffn_dim = 32, .expert_weights_norm = false,
          .shared_expert_ffn_dim = 32, .n_dense_leading = 1, .expert_weights_scale = 1.5f, .kv_lora_rank = 32,
          .q_lora_rank = q_lora, .v_head_dim = 16};
}

std::string mla_synth(const testing::TempDir& dir, int32_t q_lora = 0) {
  const std::string path = dir.file("mla" + std::to_string(q_lora) + ".gguf");
  const Status st = synth_model({.shape = mla_shape(q_lora), .dtype = DType::F32, .seed = 5, .vocab_from = ""}, path);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return path;
}

std::vector<int32_t> mla_prompt() {
  std::vector<int32_t> p;
  for (int i = 0; i < 70; ++i) p.push_back((i * 37 + 11) % 300);  // more than one KV block
  return p;
}

// Logits of every position: the prompt in one batch, or a token at a time.
std::vector<float> mla_run(Model& m, bool one_batch, KvType kv_type = KvType::F32) {
  return testing::prompt_logits(m, mla_prompt(), one_batch, kv_type);
}


TEST(Mla, CachesOnlyTheLatent) {
  testing::TempDir dir;
  auto m = Model::load(mla_synth(dir));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.kv_lora_rank, 32);
  EXPECT_EQ(c.v_head_dim, 16);
  EXPECT_EQ(c.n_dense_leading, 1);
  EXPECT_EQ(c.shared_expert_ffn_dim, 32);
  EXPECT_FLOAT_EQ(c.expert_weights_scale, 1.5f);
  const KvShape s = (*m)->kv_shape();
  EXPECT_EQ(s.n_kv_heads, 1);
  EXPECT_EQ(s.head_dim, 32 + 8);
  EXPECT_TRUE(s.keys_only);
  // 40 floats per layer, against 4 heads x (24 + 16) for full K and V.
  EXPECT_EQ(KvCache::bytes_per_token(s, KvType::F32), 3u * 40u * 4u);
  // Layer 0 dense, layers 1-2 routed: 70 tokens x top-2 each.
  mla_run(**m, true);
  const std::vector<uint64_t> counts = (*m)->expert_token_counts();
  ASSERT_EQ(counts.size(), 3u * 8u);
  uint64_t dense = 0, routed = 0;
  for (size_t e = 0; e < 8; ++e) dense += counts[e];
  for (size_t e = 8; e < counts.size(); ++e) routed += counts[e];
  EXPECT_EQ(dense, 0u);
  EXPECT_EQ(routed, 2u * 70u * 2u);
}

// The absorbed path against the naive one, in one batch and token by
// token, over an f32 and a quantized latent cache (both paths read the
// same stored latents).
class MlaPaths : public ::testing::TestWithParam<std::tuple<int32_t, KvType>> {};

TEST_P(MlaPaths, AbsorbedEqualsNaive) {
  const auto [q_lora, kv_type] = GetParam();
  testing::TempDir dir;
  auto m = Model::load(mla_synth(dir, q_lora));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<float> absorbed = mla_run(**m, true, kv_type), absorbed_steps = mla_run(**m, false, kv_type);
  (*m)->set_mla_naive(true);
  const std::vector<float> naive = mla_run(**m, true, kv_type), naive_steps = mla_run(**m, false, kv_type);
  // The f16 row kernels sum a key's products in their own order: a little
  // more rounding than f32's and q8's.
  const float tol = kv_type == KvType::F16 ? 5e-5f : 1e-5f;
  EXPECT_LT(relative_diff(naive, absorbed), tol);
  EXPECT_LT(relative_diff(naive_steps, absorbed_steps), tol);
  EXPECT_LT(relative_diff(absorbed, absorbed_steps), 1e-5f);  // prefill equals decode
  EXPECT_LT(relative_diff(naive, naive_steps), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Each, MlaPaths,
                         ::testing::Combine(::testing::Values(0, 48),
                                            ::testing::Values(KvType::F32, KvType::F16, KvType::Q8)));

// The synthetic DeepSeek-V2-Lite shape: its latent is 576 values a layer,
// full K and V would be 16 x (192 + 128) = 5120.
TEST(Mla, DeepSeekV2LiteShape) {
  auto s = model_preset("deepseek-v2-lite");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->latent_dim(), 576);
  EXPECT_EQ(s->nope_dim(), 128);
  const KvShape latent{s->n_layers, 1, s->latent_dim(), true}, full{s->n_layers, s->n_heads, (192 + 128) / 2};
  for (KvType t : {KvType::F32, KvType::F16})
    EXPECT_GE(static_cast<double>(KvCache::bytes_per_token(full, t)) / KvCache::bytes_per_token(latent, t), 8.8);
}

// Shifting cached latents by delta positions re-rotates only their k_pe
// (the last rope_dim values): layer 0's rows, which depend on token and
// position alone, then equal those computed at the new positions.
TEST(Mla, ShiftedLatentsEqualLatentsComputedAtTheNewPositions) {
  testing::TempDir dir;
  auto m = Model::load(mla_synth(dir));
  ASSERT_TRUE(m.ok()) << m.error().message;
  ThreadPool pool(2);
  const std::vector<int32_t> p = mla_prompt();
  const auto n = static_cast<int32_t>(p.size());
  constexpr int32_t kDelta = 5;
  KvCache a((*m)->kv_shape(), blocks_for_tokens(n + kDelta)), b((*m)->kv_shape(), blocks_for_tokens(n + kDelta));
  BlockTable ta, tb;
  ASSERT_TRUE(ta.reserve(a.pool(), n + kDelta));
  ASSERT_TRUE(tb.reserve(b.pool(), n + kDelta));
  std::vector<float> logits(static_cast<size_t>(n) * (*m)->config().n_vocab);
  for (auto [cache, table, first] : {std::tuple{&a, &ta, 0}, std::tuple{&b, &tb, kDelta}}) {
    Batch batch;
    const int32_t s = batch.add_sequence(table);
    for (int32_t i = 0; i < n; ++i) batch.add(p[static_cast<size_t>(i)], first + i, s, true);
    ASSERT_TRUE((*m)->forward(batch, *cache, pool, logits.data()).ok());
  }
  const size_t row = static_cast<size_t>((*m)->kv_shape().head_dim);
  std::vector<float> ka(row), kb(row);
  const auto worst = [&] {
    float d = 0.0f;
    for (int32_t i = 0; i < n; ++i) {
      a.load_key(0, ta.blocks()[static_cast<size_t>(i / kBlockTokens)], 0, i % kBlockTokens, ka.data());
      const int32_t j = i + kDelta;
      b.load_key(0, tb.blocks()[static_cast<size_t>(j / kBlockTokens)], 0, j % kBlockTokens, kb.data());
      for (size_t x = 0; x < row; ++x) d = std::max(d, std::fabs(ka[x] - kb[x]));
    }
    return d;
  };
  EXPECT_GT(worst(), 1e-2f);  // unshifted, the k_pe parts differ
  (*m)->shift_keys(a, ta, 0, n, kDelta, pool);
  EXPECT_LT(worst(), 1e-5f);
}

// The engine's prefix cache shares latent blocks like any others: requests
// after the first reuse the shared prompt's cached latents and generate
// what they generate without the prefix cache, at f32 and at a q8 latent.
TEST(Mla, PrefixCacheServesLatentBlocks) {
  testing::TempDir dir;
  auto m = Model::load(mla_synth(dir));
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::vector<int32_t> shared = mla_prompt();
  shared.resize(40);
  const std::vector<std::vector<int32_t>> tails = {{5, 6, 7}, {9, 10}, {200, 3, 4, 5}};
  for (KvType t : {KvType::F32, KvType::Q8}) {
    auto run_all = [&](bool caching) {
      EngineConfig cfg;
      cfg.n_threads = 2;
      cfg.kv_type = t;
      cfg.scheduler.prefix_caching = caching;
      Engine e(**m, cfg);
      std::vector<std::pair<std::vector<int32_t>, int32_t>> outs;  // tokens, n_cached
      for (const auto& tail : tails) {
        std::vector<int32_t> ids = shared;
        ids.insert(ids.end(), tail.begin(), tail.end());
        std::pair<std::vector<int32_t>, int32_t> out;
        RequestParams p;
        p.sampling = SamplingParams::greedy();
        p.max_tokens = 12;
        EXPECT_TRUE(e.submit(ids, p, [&out](const TokenEvent& ev) {
                       if (ev.token >= 0) out.first.push_back(ev.token);
                       if (ev.finished) out.second = ev.timings->n_cached;
                     }).ok());
        EXPECT_TRUE(e.run_until_idle().ok());
        outs.push_back(out);
      }
      return outs;
    };
    const auto cached = run_all(true), uncached = run_all(false);
    for (size_t i = 0; i < tails.size(); ++i) {
      EXPECT_EQ(cached[i].first, uncached[i].first) << i;
      EXPECT_EQ(cached[i].first.size(), 12u);
      if (i > 0) EXPECT_GE(cached[i].second, 32) << i;  // the two whole blocks of the shared prompt
    }
  }
}

// The file rewritten with keys set and tensors dropped.
std::string rewrite(const testing::TempDir& dir, const std::string& path,
                    const std::vector<std::pair<std::string, GgufValue>>& set, const std::string& drop = "") {
  auto src = GgufFile::open(path);
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys())
    if (k != "general.alignment") w.set(k, *src->find(k));
  for (const auto& [k, v] : set) w.set(k, v);
  for (const TensorView& t : src->tensors()) {
    if (t.name == drop) continue;
    EXPECT_TRUE(w.add_tensor(t.name, t.dtype, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), t.data,
                             t.nbytes).ok());
  }
  const std::string out = dir.file("rewritten.gguf");
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

std::string mla_load_error(const std::vector<std::pair<std::string, GgufValue>>& set, const std::string& drop = "") {
  testing::TempDir dir;
  auto m = Model::load(rewrite(dir, mla_synth(dir), set, drop));
  return m.ok() ? "(loaded)" : m.error().message;
}

TEST(MlaLoad, MissingTensorIsNamed) {
  const std::string e = mla_load_error({}, "blk.1.attn_kv_b.weight");
  EXPECT_NE(e.find("missing tensor blk.1.attn_kv_b.weight"), std::string::npos) << e;
  const std::string e2 = mla_load_error({}, "blk.2.attn_kv_a_norm.weight");
  EXPECT_NE(e2.find("missing tensor blk.2.attn_kv_a_norm.weight"), std::string::npos) << e2;
}

TEST(MlaLoad, KvLoraRankThatDisagreesIsNamed) {
  const std::string e = mla_load_error({{"deepseek2.attention.kv_lora_rank", GgufValue::of_u32(48)}});
  EXPECT_NE(e.find("tensor blk.0.attn_kv_a_mqa.weight has shape [64, 40], expected [64, 56]"), std::string::npos) << e;
}

TEST(MlaLoad, KeyLengthThatDisagreesIsNamed) {
  const std::string e = mla_load_error({{"deepseek2.attention.key_length", GgufValue::of_u32(32)}});
  EXPECT_NE(e.find("tensor blk.0.attn_q.weight has shape [64, 96], expected [64, 128]"), std::string::npos) << e;
  const std::string e2 = mla_load_error({{"deepseek2.attention.value_length", GgufValue::of_u32(8)}});
  EXPECT_NE(e2.find("tensor blk.0.attn_kv_b.weight has shape [32, 128], expected [32, 96]"), std::string::npos) << e2;
}

TEST(MlaLoad, MissingKvLoraRank) {
  testing::TempDir dir;
  auto src = GgufFile::open(mla_synth(dir));
  ASSERT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys())
    if (k != "general.alignment" && k != "deepseek2.attention.kv_lora_rank") w.set(k, *src->find(k));
  for (const TensorView& t : src->tensors())
    ASSERT_TRUE(w.add_tensor(t.name, t.dtype, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), t.data,
                             t.nbytes).ok());
  ASSERT_TRUE(w.write(dir.file("no_rank.gguf")).ok());
  auto m = Model::load(dir.file("no_rank.gguf"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("deepseek2.attention.kv_lora_rank"), std::string::npos) << m.error().message;
}

// DeepSeek-V2-Lite's YaRN (factor 40 over 4096, log multiplier 0.0707):
// it loads with the attention scale grown by (1 + 0.0707 ln 40)^2, and each
// missing or contradictory key is named.
TEST(MlaLoad, YarnLoadsAndItsBadKeysAreNamed) {
  const std::pair<std::string, GgufValue> type{"deepseek2.rope.scaling.type", GgufValue::of_string("yarn")};
  const std::pair<std::string, GgufValue> factor{"deepseek2.rope.scaling.factor", GgufValue::of_f32(40.0f)};
  const std::pair<std::string, GgufValue> orig{"deepseek2.rope.scaling.original_context_length", GgufValue::of_u32(4096)};
  const std::pair<std::string, GgufValue> log_mul{"deepseek2.rope.scaling.yarn_log_multiplier",
                                                  GgufValue::of_f32(0.0707f)};
  EXPECT_NE(mla_load_error({type}).find("rope.scaling.factor"), std::string::npos) << mla_load_error({type});
  EXPECT_NE(mla_load_error({type, factor}).find("original_context_length"), std::string::npos);
  const std::string betas = mla_load_error({type, factor, orig,
                                        {"deepseek2.rope.scaling.yarn_beta_fast", GgufValue::of_f32(1.0f)},
                                        {"deepseek2.rope.scaling.yarn_beta_slow", GgufValue::of_f32(32.0f)}});
  EXPECT_NE(betas.find("beta_fast > beta_slow"), std::string::npos) << betas;

  testing::TempDir dir;
  const std::string plain_path = mla_synth(dir);
  auto plain = Model::load(plain_path);
  auto yarn = Model::load(rewrite(dir, plain_path, {type, factor, orig, log_mul}));
  ASSERT_TRUE(plain.ok() && yarn.ok()) << (yarn.ok() ? "" : yarn.error().message);
  const float m = 1.0f + 0.0707f * std::log(40.0f);
  EXPECT_NEAR((*yarn)->config().attn_scale(), (*plain)->config().attn_scale() * m * m, 1e-6f);
  EXPECT_EQ((*yarn)->config().yarn.orig_ctx, 4096);
  EXPECT_EQ((*yarn)->config().rope_attn_factor, 1.0f);  // DeepSeek scales attention, not the rotated dims
}

}  // namespace
}  // namespace duet
