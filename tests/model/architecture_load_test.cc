// The loader's errors for the architectures that differ from llama in their
// tensors or keys: stories260K's weights relabelled as another architecture
// (its llama.* keys renamed) must fail on exactly what that architecture
// needs and the file lacks, and a config that contradicts itself must be
// refused by name.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/arch/arch.h"
#include "formats/gguf.h"
#include "formats/llama_synth.h"
#include "model/model.h"
#include "prompt_logits.h"
#include "test_util.h"

namespace duet {
namespace {

using Keys = std::vector<std::pair<std::string, GgufValue>>;

struct Change {
  std::string arch;
  Keys set;  // keys to set, after renaming
};

std::string rewrite(const testing::TempDir& dir, const Change& c) {
  auto src = GgufFile::open(testing::shared_path("models/stories260K/stories260K.gguf"));
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys()) {
    if (k == "general.alignment") continue;
    const std::string key = k.rfind("llama.", 0) == 0 ? c.arch + k.substr(5) : k;
    w.set(key, *src->find(k));
  }
  w.set("general.architecture", GgufValue::of_string(c.arch));
  for (const auto& [k, v] : c.set) w.set(k, v);
  for (const TensorView& t : src->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.dtype, ne, t.data, t.nbytes).ok());
  }
  const std::string path = dir.file("model.gguf");
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

std::string load_error(const std::string& arch, const Keys& set = {}) {
  testing::TempDir dir;
  auto m = Model::load(rewrite(dir, {arch, set}));
  return m.ok() ? "(loaded)" : m.error().message;
}

TEST(ArchitectureLoad, TheRewriteItselfLoads) {
  testing::TempDir dir;
  EXPECT_TRUE(Model::load(rewrite(dir, {"llama", {}})).ok());
}

TEST(ArchitectureLoad, UnknownArchitectureListsTheSupportedOnes) {
  const std::string e = load_error("gpt9");
  EXPECT_NE(e.find("unsupported architecture 'gpt9'"), std::string::npos) << e;
  EXPECT_NE(e.find("qwen3moe, olmoe, olmo2, gemma2, gemma3, phi3"), std::string::npos) << e;
}

TEST(ArchitectureLoad, Qwen3NamesItsMissingQkNorm) {
  const std::string e = load_error("qwen3");
  EXPECT_NE(e.find("missing tensor blk.0.attn_q_norm.weight"), std::string::npos) << e;
}

TEST(ArchitectureLoad, GemmaNeedsItsWindowAndPostNorms) {
  std::string e = load_error("gemma2");
  EXPECT_NE(e.find("gemma2.attention.sliding_window is missing"), std::string::npos) << e;
  e = load_error("gemma2", {{"gemma2.attention.sliding_window", GgufValue::of_u32(64)}});
  EXPECT_NE(e.find("missing tensor blk.0.post_attention_norm.weight"), std::string::npos) << e;
  // Gemma 3's per-head q/k norms come first in a layer's tensors.
  e = load_error("gemma3", {{"gemma3.attention.sliding_window", GgufValue::of_u32(64)}});
  EXPECT_NE(e.find("missing tensor blk.0.attn_q_norm.weight"), std::string::npos) << e;
}

TEST(ArchitectureLoad, OlmoNamesWhatItNeeds) {
  // stories260K has llama's pre-norms, which OLMo 2 does not read: its q/k
  // norms across heads and its post-norms are what is missing, the first
  // named. OLMoE needs a router in every layer.
  std::string e = load_error("olmo2");
  EXPECT_NE(e.find("missing tensor blk.0.attn_q_norm.weight"), std::string::npos) << e;
  e = load_error("olmoe");
  EXPECT_NE(e.find("olmoe.expert_count is missing"), std::string::npos) << e;
}

TEST(ArchitectureLoad, Phi3NamesItsFusedTensor) {
  const std::string e = load_error("phi3");
  EXPECT_NE(e.find("missing tensor blk.0.attn_qkv.weight"), std::string::npos) << e;
}

TEST(ArchitectureLoad, KvHeadsThatDoNotDivideHeads) {
  const std::string e = load_error("llama", {{"llama.attention.head_count_kv", GgufValue::of_u32(3)}});
  EXPECT_NE(e.find("is not a multiple of head_count_kv 3"), std::string::npos) << e;
}

TEST(ArchitectureLoad, HeadDimThatContradictsTheWeights) {
  const std::string e = load_error("llama", {{"llama.attention.key_length", GgufValue::of_u32(16)},
                                               {"llama.attention.value_length", GgufValue::of_u32(16)}});
  EXPECT_NE(e.find("blk.0.attn_q.weight has shape"), std::string::npos) << e;
}

TEST(ArchitectureLoad, WindowLargerThanTheContext) {
  const std::string e = load_error("llama", {{"llama.attention.sliding_window", GgufValue::of_u32(1 << 20)}});
  EXPECT_NE(e.find("larger than the context"), std::string::npos) << e;
}

// A small random model of each architecture's tensors (duet synth) runs a
// prompt in one batch and token by token through the paged cache with the
// same logits: the per-layer windows, local RoPE and fused projections read
// the cache the same way in prefill and in decode.
class SynthArchitecture : public ::testing::TestWithParam<const char*> {};

std::vector<float> run(Model& m, const std::vector<int32_t>& prompt, bool one_batch) {
  return testing::prompt_logits(m, prompt, one_batch);
}

TEST_P(SynthArchitecture, PrefillEqualsDecode) {
  testing::TempDir dir;
  SynthOptions o{.shape = {.arch = find_arch(GetParam())->arch, .name = "t", .n_vocab = 300, .dim = 64, .n_layers = 7, .n_heads = 4,
                           .n_kv_heads = 2, .head_dim = 32, .ffn_dim = 96, .ctx_len = 128, .rope_dim = 24,
                           .sliding_window = 8, .tied_output = true},
                 .dtype = DType::F32, .seed = 3, .vocab_from = ""};
  if (o.shape.arch != Arch::kPhi3) o.shape.rope_dim = 0;  // only Phi rotates part of each head
  ASSERT_TRUE(synth_model(o, dir.file("m.gguf")).ok());
  auto m = Model::load(dir.file("m.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(std::string((*m)->config().arch_name()), GetParam());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % 300);
  const std::vector<float> batched = run(**m, prompt, true), stepped = run(**m, prompt, false);
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < batched.size(); ++i) {
    ASSERT_TRUE(std::isfinite(batched[i]));
    diff = std::max(diff, std::fabs(batched[i] - stepped[i]));
    scale = std::max(scale, std::fabs(batched[i]));
  }
  EXPECT_GT(scale, 0.1f);
  EXPECT_LT(diff, 1e-4f * scale);
}

INSTANTIATE_TEST_SUITE_P(Each, SynthArchitecture, ::testing::Values("llama", "qwen3", "gemma2", "gemma3", "phi3", "olmo2"));

// A synthetic Phi-3 given LongRoPE tables (rewritten with the factors and
// keys llama.cpp's converter writes).
std::string phi3_longrope(const testing::TempDir& dir, const std::vector<float>& short_f,
                          const std::vector<float>& long_f, const std::string& name) {
  SynthOptions o{.shape = {.arch = Arch::kPhi3, .name = "t", .n_vocab = 300, .dim = 64, .n_layers = 2, .n_heads = 4,
                           .n_kv_heads = 2, .head_dim = 16, .ffn_dim = 96, .ctx_len = 128},
                 .dtype = DType::F32, .seed = 5, .vocab_from = ""};
  EXPECT_TRUE(synth_model(o, dir.file("base.gguf")).ok());
  auto src = GgufFile::open(dir.file("base.gguf"));
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys())
    if (k != "general.alignment") w.set(k, *src->find(k));
  w.set("phi3.rope.scaling.original_context_length", GgufValue::of_u32(16));
  w.set("phi3.rope.scaling.attn_factor", GgufValue::of_f32(1.2f));
  for (const TensorView& t : src->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.dtype, ne, t.data, t.nbytes).ok());
  }
  EXPECT_TRUE(w.add_tensor("rope_factors_short.weight", DType::F32, {8}, short_f.data(), 32).ok());
  EXPECT_TRUE(w.add_tensor("rope_factors_long.weight", DType::F32, {8}, long_f.data(), 32).ok());
  EXPECT_TRUE(w.write(dir.file(name)).ok());
  return dir.file(name);
}

TEST(LongRope, TheContextPicksTheFactors) {
  testing::TempDir dir;
  const std::vector<float> short_f(8, 1.0f), long_f = {1, 2, 4, 8, 16, 32, 64, 128};
  auto both = Model::load(phi3_longrope(dir, short_f, long_f, "both.gguf"));
  auto long_only = Model::load(phi3_longrope(dir, long_f, long_f, "long.gguf"));
  ASSERT_TRUE(both.ok() && long_only.ok()) << (both.ok() ? "" : both.error().message);
  EXPECT_FLOAT_EQ((*both)->config().rope_attn_factor, 1.2f);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 53 + 7) % 300);
  (*long_only)->set_context(16);
  const std::vector<float> want_long = run(**long_only, prompt, true);
  (*both)->set_context(128);  // past the original 16: long factors
  EXPECT_EQ(run(**both, prompt, true), want_long);
  (*both)->set_context(16);   // within it: short factors
  EXPECT_NE(run(**both, prompt, true), want_long);
}

}  // namespace
}  // namespace duet
