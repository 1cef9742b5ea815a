// The batched forward pass on real weights (stories260K): prefill and decode
// are one code path, and a row's logits do not depend on what else is in
// the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/gguf.h"
#include "model/model.h"
#include "test_util.h"

namespace duet {
namespace {

std::string stories_path() { return testing::shared_path("models/stories260K/stories260K.gguf"); }

struct Runner {
  std::unique_ptr<Model> model;
  ThreadPool pool{2};

  explicit Runner(LoadMode mode = LoadMode::kMap) {
    auto m = Model::load(stories_path(), mode);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    if (m.ok()) model = std::move(*m);
  }
  int32_t vocab() const { return model->config().n_vocab; }

  // Logits at every position of each prompt, all prompts in ONE batch.
  std::vector<std::vector<float>> batched(const std::vector<std::vector<int32_t>>& prompts) {
    int32_t total = 0;
    for (const auto& p : prompts) total += blocks_for_tokens(static_cast<int32_t>(p.size()));
    KvCache cache(model->kv_shape(), total);
    std::vector<BlockTable> tables(prompts.size());
    Batch batch;
    for (size_t s = 0; s < prompts.size(); ++s) {
      EXPECT_TRUE(tables[s].reserve(cache.pool(), static_cast<int32_t>(prompts[s].size())));
      const int32_t si = batch.add_sequence(&tables[s]);
      for (size_t i = 0; i < prompts[s].size(); ++i)
        batch.add(prompts[s][i], static_cast<int32_t>(i), si, true);
    }
    std::vector<float> logits(static_cast<size_t>(batch.size()) * vocab());
    EXPECT_TRUE(model->forward(batch, cache, pool, logits.data()).ok());
    std::vector<std::vector<float>> out;
    size_t row = 0;
    for (const auto& p : prompts) {
      out.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(row * vocab()),
                       logits.begin() + static_cast<std::ptrdiff_t>((row + p.size()) * vocab()));
      row += p.size();
    }
    return out;
  }
};

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

const std::vector<int32_t> kPromptA = {1, 403, 407, 261, 378, 300, 260, 270, 280, 290,
                                       310, 320, 330, 340, 350, 360, 370, 380, 390};
const std::vector<int32_t> kPromptB = {1, 50, 60, 70, 80, 90, 100};

TEST(Forward, BatchOfPromptsEqualsEachAlone) {
  Runner r;
  ASSERT_TRUE(r.model);
  const auto together = r.batched({kPromptA, kPromptB});
  const auto alone_a = r.batched({kPromptA});
  const auto alone_b = r.batched({kPromptB});
  // Same kernels, same per-row arithmetic: differences would be accumulation
  // order only; 1e-4 is far below the logits' scale (~10).
  EXPECT_LT(max_abs_diff(together[0], alone_a[0]), 1e-4f);
  EXPECT_LT(max_abs_diff(together[1], alone_b[0]), 1e-4f);
}

TEST(Forward, DecodeStepByStepEqualsPrefill) {
  Runner r;
  ASSERT_TRUE(r.model);
  const auto prefill = r.batched({kPromptA})[0];
  KvCache cache(r.model->kv_shape(), 4);
  BlockTable table;
  ASSERT_TRUE(table.reserve(cache.pool(), static_cast<int32_t>(kPromptA.size())));
  std::vector<float> logits(static_cast<size_t>(r.vocab()));
  for (size_t i = 0; i < kPromptA.size(); ++i) {
    Batch b;
    b.add(kPromptA[i], static_cast<int32_t>(i), b.add_sequence(&table), true);
    ASSERT_TRUE(r.model->forward(b, cache, r.pool, logits.data()).ok());
    const std::vector<float> expected(prefill.begin() + static_cast<std::ptrdiff_t>(i * r.vocab()),
                                      prefill.begin() + static_cast<std::ptrdiff_t>((i + 1) * r.vocab()));
    EXPECT_LT(max_abs_diff(logits, expected), 1e-4f) << "position " << i;
  }
}

TEST(Forward, ReadIntoMemoryEqualsMapped) {
  // --no-mmap: the same bytes in other memory, so the same logits bit for bit.
  Runner mapped, read(LoadMode::kRead);
  ASSERT_TRUE(mapped.model && read.model);
  const auto a = mapped.batched({kPromptA})[0];
  const auto b = read.batched({kPromptA})[0];
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(Forward, OutOfRangeTokenIsAnError) {
  Runner r;
  ASSERT_TRUE(r.model);
  KvCache cache(r.model->kv_shape(), 1);
  BlockTable table;
  ASSERT_TRUE(table.reserve(cache.pool(), 1));
  Batch b;
  b.add(r.vocab(), 0, b.add_sequence(&table), true);
  std::vector<float> logits(static_cast<size_t>(r.vocab()));
  const Status st = r.model->forward(b, cache, r.pool, logits.data());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("out of range"), std::string::npos);
}

// Rewrites the shared model with one change, to check the loader's errors.
std::string rewrite(const testing::TempDir& dir, const std::string& drop_tensor,
                    const std::string& set_key, const GgufValue& value) {
  auto src = GgufFile::open(stories_path());
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys())
    if (k != "general.alignment") w.set(k, *src->find(k));
  if (!set_key.empty()) w.set(set_key, value);
  for (const TensorView& t : src->tensors()) {
    if (t.name == drop_tensor) continue;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.dtype, ne, t.data, t.nbytes).ok());
  }
  const std::string path = dir.file("model.gguf");
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

TEST(ModelLoad, UnknownArchitectureIsNamed) {
  testing::TempDir dir;
  auto m = Model::load(rewrite(dir, "", "general.architecture", GgufValue::of_string("gpt9")));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("unsupported architecture 'gpt9'"), std::string::npos)
      << m.error().message;
}

TEST(ModelLoad, MissingTensorIsNamed) {
  testing::TempDir dir;
  auto m = Model::load(rewrite(dir, "blk.2.ffn_up.weight", "", {}));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("missing tensor blk.2.ffn_up.weight"), std::string::npos)
      << m.error().message;
}

TEST(ModelLoad, ShapeThatDisagreesWithConfigIsNamed) {
  testing::TempDir dir;
  auto m = Model::load(rewrite(dir, "", "llama.feed_forward_length", GgufValue::of_u32(100)));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("blk.0.ffn_gate.weight has shape"), std::string::npos)
      << m.error().message;
}

TEST(ModelLoad, MissingRequiredMetadataIsNamed) {
  testing::TempDir dir;
  auto src = GgufFile::open(stories_path());
  ASSERT_TRUE(src.ok());
  GgufWriter w;
  for (const std::string& k : src->keys())
    if (k != "llama.block_count") w.set(k, *src->find(k));
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(w.write(path).ok());
  auto m = Model::load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("llama.block_count"), std::string::npos) << m.error().message;
}

}  // namespace
}  // namespace duet
