#include "formats/llama_synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "core/half.h"
#include "formats/gguf.h"
#include "formats/llama_names.h"
#include "test_util.h"

namespace duet {
namespace {

namespace names = gguf_names;
using testing::TempDir;

ModelConfig small_shape() {
  return {.name = "synth-test", .n_vocab = 301, .dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
          .ffn_dim = 96, .ctx_len = 128, .rope_base = 500000.0f, .rms_eps = 1e-6f};
}

SynthOptions options(DType dtype, uint64_t seed) {
  return {.shape = small_shape(), .dtype = dtype, .seed = seed, .vocab_from = ""};
}

// The small shape drawn in `dtype` with `seed`, written to dir and opened.
Result<GgufFile> synth_file(const TempDir& dir, DType dtype, uint64_t seed) {
  const std::string path = dir.file("m.gguf");
  DUET_TRY(synth_model(options(dtype, seed), path));
  return GgufFile::open(path);
}

void expect_tensor(const GgufFile& f, const std::string& name, DType dtype, int64_t ne0, int64_t ne1) {
  const TensorView* t = f.tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->dtype, dtype) << name;
  EXPECT_EQ(t->ne[0], ne0) << name;
  EXPECT_EQ(t->ne[1], ne1) << name;
}

TEST(LlamaSynth, WritesShapesKeysAndDtypes) {
  TempDir dir;
  auto f = synth_file(dir, DType::F16, 7);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*f->get_string(names::kArchitecture), "llama");
  EXPECT_EQ(*f->get_string(names::kName), "synth-test");
  EXPECT_EQ(*f->get_uint(names::kFileType), 1u);
  EXPECT_EQ(*f->get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->get_uint("llama.feed_forward_length"), 96u);
  EXPECT_EQ(*f->get_uint("llama.block_count"), 2u);
  EXPECT_EQ(*f->get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(*f->get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(*f->get_uint("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(*f->get_uint("llama.context_length"), 128u);
  EXPECT_DOUBLE_EQ(*f->get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_NEAR(*f->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-6, 1e-12);
  EXPECT_FALSE(f->has("llama.attention.key_length"));  // head_dim is dim/heads

  auto tokens = f->get_strings(names::kTokTokens);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 301u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  EXPECT_EQ(f->get_ints(names::kTokTypes)->size(), 301u);
  EXPECT_EQ(f->get_floats(names::kTokScores)->size(), 301u);
  EXPECT_EQ(*f->get_uint(names::kTokBos), 1u);
  EXPECT_EQ(*f->get_uint(names::kTokEos), 2u);

  EXPECT_EQ(f->tensors().size(), 2u + 2 * 9 + 1);
  expect_tensor(*f, names::kTokenEmbd, DType::F16, 64, 301);
  expect_tensor(*f, names::kOutput, DType::F16, 64, 301);
  expect_tensor(*f, names::kOutputNorm, DType::F32, 64, 1);
  for (int l = 0; l < 2; ++l) {
    expect_tensor(*f, names::blk(l, names::kAttnNorm), DType::F32, 64, 1);
    expect_tensor(*f, names::blk(l, names::kAttnQ), DType::F16, 64, 64);
    expect_tensor(*f, names::blk(l, names::kAttnK), DType::F16, 64, 32);
    expect_tensor(*f, names::blk(l, names::kAttnV), DType::F16, 64, 32);
    expect_tensor(*f, names::blk(l, names::kAttnOut), DType::F16, 64, 64);
    expect_tensor(*f, names::blk(l, names::kFfnNorm), DType::F32, 64, 1);
    expect_tensor(*f, names::blk(l, names::kFfnGate), DType::F16, 64, 96);
    expect_tensor(*f, names::blk(l, names::kFfnUp), DType::F16, 64, 96);
    expect_tensor(*f, names::blk(l, names::kFfnDown), DType::F16, 96, 64);
  }
}

// Values are finite, centred and scaled as documented: the query matrix has
// deviation 1/sqrt(dim), norms are 1 with small noise.
TEST(LlamaSynth, WeightStatistics) {
  TempDir dir;
  auto f = synth_file(dir, DType::BF16, 3);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*f->get_uint(names::kFileType), 32u);
  const TensorView* q = f->tensor(names::blk(0, names::kAttnQ));
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->dtype, DType::BF16);
  const auto* bits = static_cast<const uint16_t*>(q->data);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < q->elements(); ++i) {
    const double x = bf16_to_f32(bits[i]);
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += x * x;
  }
  const double n = static_cast<double>(q->elements());
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / n), 1.0 / 8.0, 0.01);

  const TensorView* norm = f->tensor(names::blk(1, names::kFfnNorm));
  ASSERT_NE(norm, nullptr);
  const auto* w = static_cast<const float*>(norm->data);
  for (int64_t i = 0; i < norm->elements(); ++i) EXPECT_NEAR(w[i], 1.0f, 0.5f);
}

TEST(LlamaSynth, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir dir;
  ASSERT_TRUE(synth_model(options(DType::F32, 42), dir.file("a.gguf")).ok());
  ASSERT_TRUE(synth_model(options(DType::F32, 42), dir.file("b.gguf")).ok());
  ASSERT_TRUE(synth_model(options(DType::F32, 43), dir.file("c.gguf")).ok());
  const std::string a = testing::read_file(dir.file("a.gguf")), b = testing::read_file(dir.file("b.gguf")),
                    c = testing::read_file(dir.file("c.gguf"));
  ASSERT_GT(a.size(), 64u * 301u * 4u);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());  // same shape, same layout
  EXPECT_NE(a, c);
}

TEST(LlamaSynth, TiedHeadAndExplicitHeadDim) {
  TempDir dir;
  SynthOptions opt = options(DType::F32, 1);
  opt.shape.tied_output = true;
  opt.shape.head_dim = 32;  // 4 heads * 32 = 128 != dim 64
  ASSERT_TRUE(synth_model(opt, dir.file("m.gguf")).ok());
  auto f = GgufFile::open(dir.file("m.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tensor(names::kOutput), nullptr);
  EXPECT_EQ(*f->get_uint(names::kFileType), 0u);
  EXPECT_EQ(*f->get_uint("llama.attention.key_length"), 32u);
  EXPECT_EQ(*f->get_uint("llama.attention.value_length"), 32u);
  EXPECT_EQ(*f->get_uint("llama.rope.dimension_count"), 32u);
  expect_tensor(*f, names::blk(0, names::kAttnQ), DType::F32, 64, 128);
  expect_tensor(*f, names::blk(0, names::kAttnK), DType::F32, 64, 64);
  expect_tensor(*f, names::blk(0, names::kAttnOut), DType::F32, 128, 64);
}

TEST(LlamaSynth, CopiesVocabularyFromAnotherGguf) {
  TempDir dir;
  const std::string src = testing::shared_path("models/stories260K/stories260K.gguf");
  auto ref = GgufFile::open(src);
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  SynthOptions opt = options(DType::F32, 1);
  opt.shape.n_vocab = 0;
  opt.vocab_from = src;
  ASSERT_TRUE(synth_model(opt, dir.file("m.gguf")).ok());
  auto f = GgufFile::open(dir.file("m.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*f->get_strings(names::kTokTokens), *ref->get_strings(names::kTokTokens));
  EXPECT_EQ(*f->get_floats(names::kTokScores), *ref->get_floats(names::kTokScores));
  EXPECT_EQ(*f->get_string(names::kTokModel), *ref->get_string(names::kTokModel));
  expect_tensor(*f, names::kTokenEmbd, DType::F32, 64, 512);

  opt.shape.n_vocab = 1000;  // disagrees with the file's 512 tokens
  Status st = synth_model(opt, dir.file("n.gguf"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("512"), std::string::npos) << st.error().message;
}

TEST(LlamaSynth, RejectsUnusableShapes) {
  TempDir dir;
  auto fails_with = [&](SynthOptions opt, const std::string& needle) {
    Status st = synth_model(opt, dir.file("bad.gguf"));
    ASSERT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
  };
  SynthOptions o = options(DType::F32, 0);
  o.shape.n_kv_heads = 3;
  fails_with(o, "kv-heads");
  o = options(DType::F32, 0);
  o.shape.n_vocab = 100;
  fails_with(o, "vocab-size");
  o = options(DType::F32, 0);
  o.shape.dim = 0;
  fails_with(o, "dim");
  o = options(DType::Q8_0, 0);
  fails_with(o, "Q8_0");
  o = options(DType::F32, 0);
  o.shape.head_dim = 7;
  fails_with(o, "head-dim");
  EXPECT_FALSE(model_preset("gpt-5").ok());
  auto p = model_preset("tinyllama-1.1b");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_kv_heads, 4);
  EXPECT_TRUE(validate_shape(*p).ok());
}

}  // namespace
}  // namespace duet
