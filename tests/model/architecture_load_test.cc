// The loader's errors for the architectures that differ from llama in their
// tensors or keys: stories260K's weights relabelled as another architecture
// (its llama.* keys renamed) must fail on exactly what that architecture
// needs and the file lacks, and a config that contradicts itself must be
// refused by name.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "model/model.h"
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
  EXPECT_NE(e.find("qwen3, gemma2, gemma3, phi3"), std::string::npos) << e;
}

TEST(ArchitectureLoad, Qwen3NamesItsMissingQkNorm) {
  const std::string e = load_error("qwen3");
  EXPECT_NE(e.find("missing tensor blk.0.attn_q_norm.weight"), std::string::npos) << e;
}

TEST(ArchitectureLoad, GemmaNeedsItsWindowAndPostNorms) {
  std::string e = load_error("gemma2");
  EXPECT_NE(e.find("gemma2.attention.sliding_window is missing"), std::string::npos) << e;
  e = load_error("gemma3", {{"gemma3.attention.sliding_window", GgufValue::of_u32(64)}});
  EXPECT_NE(e.find("missing tensor blk.0.post_attention_norm.weight"), std::string::npos) << e;
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

}  // namespace
}  // namespace duet
