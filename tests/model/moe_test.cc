// Mixtures of experts: the routing rule, and the grouped expert products
// that serve a whole batch giving the same logits as one token at a time
// (each token then alone with its experts), including a batch in which two
// experts take every token and the rest none; and the loader's errors for a
// file whose experts contradict its config.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "formats/arch/arch.h"
#include "formats/gguf.h"
#include "formats/llama_synth.h"
#include "model/model.h"
#include "model/moe.h"
#include "quantize/quantize_gguf.h"
#include "prompt_logits.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::relative_diff;

TEST(RouteTokens, TopKOfTheSoftmaxGroupedByExpert) {
  // Row 0 prefers experts 2 then 0; row 1 prefers 1 then 2.
  const std::vector<float> logits = {1.0f, -1.0f, 2.0f, 0.0f,  //
                                     0.0f, 3.0f, 1.0f, -2.0f};
  ExpertRoutes r;
  route_tokens(logits.data(), 2, 4, 2, /*renormalize=*/true, r);
  EXPECT_EQ(r.offset, (std::vector<int32_t>{0, 1, 2, 4, 4}));
  EXPECT_EQ(r.rows, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(r.entries, (std::vector<int32_t>{0, 2, 1, 3}));  // per row, its experts ascending
  const float w0 = 1.0f / (1.0f + std::exp(1.0f));  // row 0: e^1 / (e^1 + e^2)
  EXPECT_NEAR(r.weights[0], w0, 1e-6f);
  EXPECT_NEAR(r.weights[2], 1.0f - w0, 1e-6f);
  EXPECT_NEAR(r.weights[1] + r.weights[3], 1.0f, 1e-6f);

  route_tokens(logits.data(), 2, 4, 2, /*renormalize=*/false, r);
  const float z0 = std::exp(1.0f) + std::exp(-1.0f) + std::exp(2.0f) + 1.0f;
  EXPECT_NEAR(r.weights[0], std::exp(1.0f) / z0, 1e-6f);  // plain softmax probabilities
}

TEST(RouteTokens, TiesGoToTheLowerExpert) {
  const std::vector<float> logits(3 * 6, 0.5f);
  ExpertRoutes r;
  route_tokens(logits.data(), 3, 6, 2, true, r);
  EXPECT_EQ(r.count(0), 3);
  EXPECT_EQ(r.count(1), 3);
  for (int e = 2; e < 6; ++e) EXPECT_EQ(r.count(e), 0);
  for (float w : r.weights) EXPECT_FLOAT_EQ(w, 0.5f);
}

ModelConfig moe_shape(const std::string& arch) {
  // Rows of 256 so that Q4_K applies to every matrix.
  return {.arch = find_arch(arch)->arch, .name = "moe", .n_vocab = 300, .dim = 256, .n_layers = 3, .n_heads = 4, .n_kv_heads = 2,
          .head_dim = 16, .ffn_dim = 96, .ctx_len = 128, .n_experts = 8, .n_experts_used = 2, .expert_ffn_dim = 256};
}

std::string moe_synth(const testing::TempDir& dir, const std::string& arch, DType quant = DType::F32) {
  const std::string f32 = dir.file(arch + ".gguf");
  EXPECT_TRUE(synth_model({.shape = moe_shape(arch), .dtype = DType::F32, .seed = 9, .vocab_from = ""}, f32).ok());
  if (quant == DType::F32) return f32;
  auto in = GgufFile::open(f32);
  EXPECT_TRUE(in.ok());
  ThreadPool pool(2);
  const std::string out = dir.file(arch + "-" + std::string(dtype_name(quant)) + ".gguf");
  QuantizeOptions o;
  o.target = quant;
  EXPECT_TRUE(quantize_gguf(*in, out, o, pool, {}).ok());
  return out;
}

// The file at `path` rewritten: keys set, tensors dropped or replaced.
struct Rewrite {
  std::vector<std::pair<std::string, GgufValue>> set = {};
  std::vector<std::string> drop = {};
  std::function<void(const TensorView&, std::vector<uint8_t>&)> edit = {};  // may change a copy of the bytes
  std::vector<std::pair<std::string, int64_t>> shorten = {};  // an F32 vector cut to this many elements
};

std::string rewrite(const testing::TempDir& dir, const std::string& path, const Rewrite& r) {
  auto src = GgufFile::open(path);
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys())
    if (k != "general.alignment") w.set(k, *src->find(k));
  for (const auto& [k, v] : r.set) w.set(k, v);
  for (const TensorView& t : src->tensors()) {
    if (std::find(r.drop.begin(), r.drop.end(), t.name) != r.drop.end()) continue;
    const auto* p = static_cast<const uint8_t*>(t.data);
    std::vector<uint8_t> bytes(p, p + t.nbytes);
    if (r.edit) r.edit(t, bytes);
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    for (const auto& [name, n] : r.shorten)
      if (name == t.name) {
        ne = {n};
        bytes.resize(static_cast<size_t>(n) * sizeof(float));
      }
    EXPECT_TRUE(w.add_tensor(t.name, t.dtype, ne, bytes.data(), bytes.size()).ok());
  }
  const std::string out = dir.file("rewritten.gguf");
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

std::vector<float> moe_run(Model& m, const std::vector<int32_t>& prompt, bool one_batch) {
  return testing::prompt_logits(m, prompt, one_batch);
}

std::vector<int32_t> moe_prompt() {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back((i * 37 + 11) % 300);
  return p;
}


// Every quant type duet has serves expert tensors: the packed ones through
// the grouped matmul, the rest through one matmul per expert.
class MoeGrouped : public ::testing::TestWithParam<std::tuple<const char*, DType>> {};

TEST_P(MoeGrouped, PrefillEqualsDecode) {
  const auto [arch, type] = GetParam();
  testing::TempDir dir;
  auto m = Model::load(moe_synth(dir, arch, type));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->config().n_experts, 8);
  const std::vector<float> batched = moe_run(**m, moe_prompt(), true), stepped = moe_run(**m, moe_prompt(), false);
  // Prefill attends by rows and decode by parts, which round differently in
  // the last bit; with int8 activations such a bit can flip one rounding of
  // the next matmul's input, a jump of a few 1e-3 (qwen3moe IQ4_XS: 4.3e-3).
  // A wrongly grouped or sliced expert moves the logits by O(1).
  EXPECT_LT(relative_diff(batched, stepped), type == DType::F32 ? 1e-4f : 2e-2f);
  if (type != DType::F32) {
    // The same weights dequantized (F32, never packed as quantized rows):
    // only the activations' rounding differs, so a wrongly sliced packed
    // expert would stand out. That rounding can flip a close routing choice
    // at a few positions (a jump, not drift), so most positions, not all,
    // must agree.
    auto q = GgufFile::open(moe_synth(dir, arch, type));
    ASSERT_TRUE(q.ok());
    ThreadPool pool(2);
    QuantizeOptions o;
    o.target = DType::F32;
    ASSERT_TRUE(quantize_gguf(*q, dir.file("dequantized.gguf"), o, pool, {}).ok());
    auto f32 = Model::load(dir.file("dequantized.gguf"));
    ASSERT_TRUE(f32.ok());
    const std::vector<float> want = moe_run(**f32, moe_prompt(), true);
    const size_t vocab = want.size() / moe_prompt().size();
    int close = 0;
    for (size_t p = 0; p < moe_prompt().size(); ++p) {
      const std::vector<float> a(want.begin() + p * vocab, want.begin() + (p + 1) * vocab);
      const std::vector<float> b(batched.begin() + p * vocab, batched.begin() + (p + 1) * vocab);
      close += relative_diff(a, b) < 0.02f;
    }
    std::printf("%s %s: %d of %zu positions within 2%% of its dequantized weights' logits\n", arch,
                std::string(dtype_name(type)).c_str(), close, moe_prompt().size());
    EXPECT_GE(close, 34);
  }
  // 3 layers x 40 tokens x top-2, twice; spread over more than the top two.
  const std::vector<uint64_t> counts = (*m)->expert_token_counts();
  ASSERT_EQ(counts.size(), 3u * 8u);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), uint64_t{0}), 2u * 3u * 40u * 2u);
  EXPECT_GT(std::count_if(counts.begin(), counts.begin() + 8, [](uint64_t c) { return c > 0; }), 2);
}

INSTANTIATE_TEST_SUITE_P(Each, MoeGrouped,
                         ::testing::Combine(::testing::Values("llama", "qwen3moe"),
                                            ::testing::Values(DType::F32, DType::Q8_0, DType::Q4_K, DType::Q4_0, DType::Q6_K,
                                                              DType::Q3_K, DType::IQ4_XS, DType::Q5_0)));

// OLMoE: its q and k norms span every head; only the grouping is new here.
INSTANTIATE_TEST_SUITE_P(Olmoe, MoeGrouped,
                         ::testing::Combine(::testing::Values("olmoe"), ::testing::Values(DType::F32, DType::Q4_K)));

// A router of zeros ties every expert, so experts 0 and 1 take every token
// (at weight 1/2 each) and the other six none.
TEST(MoeGrouped, TwoExpertsTakeEveryTokenTheRestNone) {
  testing::TempDir dir;
  const std::string path = rewrite(dir, moe_synth(dir, "qwen3moe"), {.edit = [](const TensorView& t, std::vector<uint8_t>& b) {
                                     if (t.name.find("ffn_gate_inp") != std::string::npos) std::fill(b.begin(), b.end(), 0);
                                   }});
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<float> batched = moe_run(**m, moe_prompt(), true), stepped = moe_run(**m, moe_prompt(), false);
  EXPECT_LT(relative_diff(batched, stepped), 1e-4f);
  const std::vector<uint64_t> counts = (*m)->expert_token_counts();
  for (size_t l = 0; l < 3; ++l)
    for (size_t e = 0; e < 8; ++e) EXPECT_EQ(counts[l * 8 + e], e < 2 ? 80u : 0u) << "layer " << l << " expert " << e;
}

std::string moe_load_error(const Rewrite& r, const std::string& arch = "qwen3moe") {
  testing::TempDir dir;
  auto m = Model::load(rewrite(dir, moe_synth(dir, arch), r));
  return m.ok() ? "(loaded)" : m.error().message;
}

TEST(MoeFlops, OnlyTheActiveExpertsAndTheHeadApart) {
  const testing::TempDir dir;
  auto m = Model::load(moe_synth(dir, "qwen3moe"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  // Per layer: q and o (256 x 64 each), k and v (256 x 32 each), the router
  // (256 x 8) and 2 of 8 experts' three 256 x 256 matrices; 2 FLOPs each.
  const double layer = 256.0 * (64 + 2 * 32) + 64.0 * 256 + 256.0 * (8 + 3 * 256 * 2);
  EXPECT_DOUBLE_EQ((*m)->layer_flops_per_token(), 2 * 3 * layer);
  EXPECT_DOUBLE_EQ((*m)->head_flops(), 2.0 * 256 * 300);
}

TEST(MoeLoad, MoreExpertsUsedThanThereAre) {
  const std::string e = moe_load_error({.set = {{"qwen3moe.expert_used_count", GgufValue::of_u32(9)}}});
  EXPECT_NE(e.find("expert_used_count 9 must be between 1 and the 8 experts"), std::string::npos) << e;
}

TEST(MoeLoad, MissingExpertTensorIsNamed) {
  const std::string e = moe_load_error({.drop = {"blk.1.ffn_up_exps.weight"}});
  EXPECT_NE(e.find("missing tensor blk.1.ffn_up_exps.weight"), std::string::npos) << e;
}

TEST(MoeLoad, ExpertShapeThatDisagreesIsNamed) {
  const std::string e = moe_load_error({.set = {{"qwen3moe.expert_feed_forward_length", GgufValue::of_u32(48)}}});
  EXPECT_NE(e.find("blk.0.ffn_gate_exps.weight has shape [256, 256, 8], expected [256, 48, 8]"), std::string::npos) << e;
}

TEST(MoeLoad, RouterWithoutExpertCount) {
  const std::string e = moe_load_error({.set = {{"llama.expert_count", GgufValue::of_u32(0)}}}, "llama");
  EXPECT_NE(e.find("has a router (blk.0.ffn_gate_inp.weight) but the file sets no expert_count"), std::string::npos) << e;
}

TEST(MoeLoad, OlmoeNormOfOneHeadIsNamed) {
  // OLMoE's q norm spans the 4 heads of 16: a Qwen3-style per-head one is refused.
  const std::string e = moe_load_error({.shorten = {{"blk.0.attn_q_norm.weight", 16}}}, "olmoe");
  EXPECT_NE(e.find("blk.0.attn_q_norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("64"), std::string::npos) << e;
}

TEST(MoeLoad, Qwen3MoeWithoutExperts) {
  const std::string e = moe_load_error({.set = {{"qwen3moe.expert_count", GgufValue::of_u32(0)}}});
  EXPECT_NE(e.find("qwen3moe.expert_count is missing"), std::string::npos) << e;
}

}  // namespace
}  // namespace duet
