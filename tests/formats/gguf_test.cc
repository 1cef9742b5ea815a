// GGUF writer -> reader round trips, getters, writer checks, and real files.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "formats/gguf.h"
#include "test_util.h"

namespace duet {
namespace {

namespace dt = duet::testing;

// Compares two values field by field, recursing into arrays.
void expect_same(const GgufValue& want, const GgufValue& got, const std::string& where) {
  ASSERT_EQ(want.type, got.type) << where;
  switch (want.type) {
    case GgufType::STRING: EXPECT_EQ(want.str, got.str) << where; break;
    case GgufType::BOOL: EXPECT_EQ(want.b, got.b) << where; break;
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: EXPECT_EQ(want.f64, got.f64) << where; break;
    case GgufType::ARRAY:
      ASSERT_EQ(want.elem_type, got.elem_type) << where;
      ASSERT_EQ(want.items.size(), got.items.size()) << where;
      for (size_t i = 0; i < want.items.size(); ++i)
        expect_same(want.items[i], got.items[i], where + "[" + std::to_string(i) + "]");
      break;
    default:
      EXPECT_EQ(want.u64, got.u64) << where;
      EXPECT_EQ(want.i64, got.i64) << where;
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> ne;
  std::vector<uint8_t> data;
};

std::vector<std::pair<std::string, GgufValue>> every_kind_of_value() {
  using V = GgufValue;
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"s.u8", V::of_u8(250)},
      {"s.i8", V::of_i8(-120)},
      {"s.u16", V::of_u16(65000)},
      {"s.i16", V::of_i16(-32000)},
      {"s.u32", V::of_u32(4000000000u)},
      {"s.i32", V::of_i32(-2000000000)},
      {"s.u64", V::of_u64(std::numeric_limits<uint64_t>::max())},
      {"s.i64", V::of_i64(std::numeric_limits<int64_t>::min())},
      {"s.f32", V::of_f32(3.25e-7f)},
      {"s.f64", V::of_f64(-1.0 / 3.0)},
      {"s.true", V::of_bool(true)},
      {"s.false", V::of_bool(false)},
      {"s.string", V::of_string("h\xC3\xA9llo, w\xE2\x80\x94rld")},
      {"s.empty", V::of_string("")},
      {"s.nul", V::of_string(std::string("a\0b", 3))},
      {"a.u8", V::of_array(GgufType::UINT8, {V::of_u8(0), V::of_u8(255)})},
      {"a.i8", V::of_array(GgufType::INT8, {V::of_i8(-128), V::of_i8(127)})},
      {"a.u16", V::of_array(GgufType::UINT16, {V::of_u16(1), V::of_u16(65535)})},
      {"a.i16", V::of_array(GgufType::INT16, {V::of_i16(-32768)})},
      {"a.u32", V::of_array(GgufType::UINT32, {V::of_u32(7), V::of_u32(8), V::of_u32(9)})},
      {"a.i32", V::of_i32s({-1, 0, 1, 2147483647})},
      {"a.u64", V::of_array(GgufType::UINT64, {V::of_u64(uint64_t{1} << 63)})},
      {"a.i64", V::of_array(GgufType::INT64, {V::of_i64(-5), V::of_i64(int64_t{1} << 40)})},
      {"a.f32", V::of_f32s({0.5f, -0.0f, 1e30f, std::numeric_limits<float>::infinity()})},
      {"a.f64", V::of_array(GgufType::FLOAT64, {V::of_f64(2.5), V::of_f64(-1e300)})},
      {"a.bool", V::of_array(GgufType::BOOL, {V::of_bool(true), V::of_bool(false)})},
      {"a.string", V::of_strings({"<unk>", "", "\xE2\x96\x81the"})},
      {"a.empty", V::of_array(GgufType::FLOAT32, {})},
      {"a.nested",
       V::of_array(GgufType::ARRAY,
                   {V::of_i32s({1, 2, 3}), V::of_i32s({}),
                    V::of_array(GgufType::STRING, {V::of_string("x")})})},
      {"a.deep", V::of_array(GgufType::ARRAY,
                             {V::of_array(GgufType::ARRAY, {V::of_strings({"in", "ner"})})})},
  };
  return kv;
}

std::vector<TensorSpec> some_tensors() {
  return {
      {"f32.matrix", DType::F32, {8, 3}, random_bytes(8 * 3 * 4, 1)},
      {"f16.vector", DType::F16, {5}, random_bytes(5 * 2, 2)},    // 10 bytes: needs padding
      {"q8_0.matrix", DType::Q8_0, {64, 3}, random_bytes(2 * 34 * 3, 3)},
      {"f32.4d", DType::F32, {2, 3, 4, 5}, random_bytes(2 * 3 * 4 * 5 * 4, 4)},
      {"q4_k.row", DType::Q4_K, {256}, random_bytes(144, 5)},
  };
}

void check_round_trip(size_t alignment) {
  dt::TempDir dir;
  const std::string path = dir.file("all.gguf");
  auto kv = every_kind_of_value();
  if (alignment != 32)
    kv.insert(kv.begin() + 3, {"general.alignment", GgufValue::of_u32(static_cast<uint32_t>(alignment))});
  const auto tensors = some_tensors();

  GgufWriter w;
  for (const auto& [k, v] : kv) w.set(k, v);
  for (const auto& t : tensors)
    ASSERT_TRUE(w.add_tensor(t.name, t.dtype, t.ne, t.data.data(), t.data.size()).ok()) << t.name;
  const Status s = w.write(path);
  ASSERT_TRUE(s.ok()) << s.error().message;

  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(f->data_offset() % alignment, 0u);

  ASSERT_EQ(f->keys().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f->keys()[i], kv[i].first) << "key order";
    const GgufValue* got = f->find(kv[i].first);
    ASSERT_NE(got, nullptr) << kv[i].first;
    expect_same(kv[i].second, *got, kv[i].first);
  }

  ASSERT_EQ(f->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& want = tensors[i];
    const TensorView& got = f->tensors()[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.dtype, want.dtype) << want.name;
    EXPECT_EQ(got.n_dims, static_cast<int>(want.ne.size())) << want.name;
    for (size_t d = 0; d < 4; ++d)
      EXPECT_EQ(got.ne[d], d < want.ne.size() ? want.ne[d] : 1) << want.name << " dim " << d;
    ASSERT_EQ(got.nbytes, want.data.size()) << want.name;
    EXPECT_EQ(std::memcmp(got.data, want.data.data(), want.data.size()), 0) << want.name;
    EXPECT_EQ(f->file_offset(got) % alignment, 0u) << want.name;
    EXPECT_EQ(f->tensor(want.name), &got);
  }
  EXPECT_EQ(f->tensor("missing"), nullptr);
}

TEST(Gguf, RoundTripsEveryValueKindAndTensors) { check_round_trip(32); }
TEST(Gguf, RoundTripsWithCustomAlignment) { check_round_trip(64); }
TEST(Gguf, RoundTripsWithByteAlignment) { check_round_trip(1); }

TEST(Gguf, SetReplacesInPlace) {
  dt::TempDir dir;
  GgufWriter w;
  w.set("a", GgufValue::of_u32(1));
  w.set("b", GgufValue::of_u32(2));
  w.set("a", GgufValue::of_string("again"));
  ASSERT_TRUE(w.write(dir.file("x.gguf")).ok());
  auto f = GgufFile::open(dir.file("x.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*f->get_string("a"), "again");
  EXPECT_TRUE(f->tensors().empty());
}

class GgufGetters : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.set("u", GgufValue::of_u32(42));
    w.set("neg", GgufValue::of_i32(-3));
    w.set("pos_i", GgufValue::of_i64(7));
    w.set("f", GgufValue::of_f32(0.5f));
    w.set("s", GgufValue::of_string("text"));
    w.set("b", GgufValue::of_bool(true));
    w.set("strs", GgufValue::of_strings({"a", "b"}));
    w.set("floats", GgufValue::of_f32s({1.5f, -2}));
    w.set("ints", GgufValue::of_i32s({3, -4}));
    w.set("big_u32s", GgufValue::of_array(GgufType::UINT32, {GgufValue::of_u32(3000000000u)}));
    path_ = dir_.file("g.gguf");
    ASSERT_TRUE(w.write(path_).ok());
    auto f = GgufFile::open(path_);
    ASSERT_TRUE(f.ok()) << f.error().message;
    file_ = std::make_unique<GgufFile>(std::move(*f));
  }
  dt::TempDir dir_;
  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufGetters, ReturnValuesOfTheRightType) {
  EXPECT_EQ(*file_->get_uint("u"), 42u);
  EXPECT_EQ(*file_->get_uint("pos_i"), 7u);
  EXPECT_EQ(*file_->get_float("f"), 0.5);
  EXPECT_EQ(*file_->get_float("u"), 42.0);
  EXPECT_EQ(*file_->get_float("neg"), -3.0);
  EXPECT_EQ(*file_->get_string("s"), "text");
  EXPECT_TRUE(*file_->get_bool("b"));
  EXPECT_EQ(*file_->get_strings("strs"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*file_->get_floats("floats"), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(*file_->get_ints("ints"), (std::vector<int32_t>{3, -4}));
  EXPECT_EQ(*file_->get_uint_or("absent", 9), 9u);
  EXPECT_EQ(*file_->get_uint_or("u", 9), 42u);
  EXPECT_EQ(*file_->get_float_or("absent", 1.25), 1.25);
}

TEST_F(GgufGetters, ErrorsNameTheKeyAndProblem) {
  auto missing = file_->get_uint("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("missing metadata key 'nope'"), std::string::npos);
  EXPECT_NE(missing.error().message.find(path_), std::string::npos);

  auto negative = file_->get_uint("neg");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("'neg'"), std::string::npos);

  auto wrong = file_->get_string("u");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("has type u32; expected a string"), std::string::npos);

  auto wrong_array = file_->get_floats("strs");
  ASSERT_FALSE(wrong_array.ok());
  EXPECT_NE(wrong_array.error().message.find("array of string"), std::string::npos);

  EXPECT_FALSE(file_->get_ints("big_u32s").ok());  // 3e9 does not fit in int32
  EXPECT_FALSE(file_->get_uint_or("s", 1).ok());    // present but the wrong type
  EXPECT_FALSE(file_->get_bool("u").ok());
  EXPECT_FALSE(file_->get_float("s").ok());
}

TEST(GgufWriter, RejectsInconsistentInput) {
  dt::TempDir dir;
  const std::vector<uint8_t> bytes(1024);
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor("short", DType::F32, {4, 4}, bytes.data(), 60).ok());
  EXPECT_FALSE(w.add_tensor("partial_block", DType::Q8_0, {48}, bytes.data(), 51).ok());
  EXPECT_FALSE(w.add_tensor("no_dims", DType::F32, {}, bytes.data(), 0).ok());
  EXPECT_FALSE(w.add_tensor("five_dims", DType::F32, {1, 1, 1, 1, 1}, bytes.data(), 4).ok());
  EXPECT_FALSE(w.add_tensor("zero", DType::F32, {0}, bytes.data(), 0).ok());
  ASSERT_TRUE(w.add_tensor("ok", DType::F32, {4}, bytes.data(), 16).ok());
  EXPECT_FALSE(w.add_tensor("ok", DType::F32, {4}, bytes.data(), 16).ok());

  GgufValue too_big = GgufValue::of_u64(300);
  too_big.type = GgufType::UINT8;
  GgufWriter w2;
  w2.set("x", too_big);
  EXPECT_FALSE(w2.write(dir.file("a.gguf")).ok());

  GgufWriter w3;
  w3.set("mixed", GgufValue::of_array(GgufType::UINT32, {GgufValue::of_u32(1), GgufValue::of_i32(1)}));
  EXPECT_FALSE(w3.write(dir.file("b.gguf")).ok());

  GgufWriter w4;
  w4.set("general.alignment", GgufValue::of_u32(24));
  EXPECT_FALSE(w4.write(dir.file("c.gguf")).ok());

  GgufWriter w5;
  EXPECT_FALSE(w5.write(dir.path() + "/no/such/dir/x.gguf").ok());
}

TEST(GgufReal, Stories260K) {
  auto f = GgufFile::open(dt::shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  ASSERT_EQ(f->tensors().size(), 48u);
  for (const TensorView& t : f->tensors()) EXPECT_EQ(t.dtype, DType::F32) << t.name;

  // The shapes agree with the hyper-parameters and the vocabulary.
  const uint64_t dim = *f->get_uint("llama.embedding_length");
  const auto tokens = *f->get_strings("tokenizer.ggml.tokens");
  const TensorView* emb = f->tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(static_cast<uint64_t>(emb->ne[0]), dim);
  EXPECT_EQ(static_cast<size_t>(emb->ne[1]), tokens.size());
  EXPECT_EQ(f->get_floats("tokenizer.ggml.scores")->size(), tokens.size());
  EXPECT_EQ(f->get_ints("tokenizer.ggml.token_type")->size(), tokens.size());
  const uint64_t layers = *f->get_uint("llama.block_count");
  EXPECT_NE(f->tensor("blk." + std::to_string(layers - 1) + ".ffn_down.weight"), nullptr);
  EXPECT_EQ(f->tensor("blk." + std::to_string(layers) + ".ffn_down.weight"), nullptr);

  // Weights are real numbers, not zeros or garbage.
  const auto* w = static_cast<const float*>(emb->data);
  double sum_sq = 0;
  for (int64_t i = 0; i < emb->elements(); ++i) {
    ASSERT_TRUE(std::isfinite(w[i])) << i;
    sum_sq += double{w[i]} * w[i];
  }
  EXPECT_GT(sum_sq, 0.0);
}

TEST(GgufReal, RewritingStories260KPreservesEverything) {
  auto f = GgufFile::open(dt::shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  GgufWriter w;
  for (const std::string& k : f->keys()) w.set(k, *f->find(k));
  for (const TensorView& t : f->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    ASSERT_TRUE(w.add_tensor(t.name, t.dtype, ne, t.data, t.nbytes).ok());
  }
  dt::TempDir dir;
  ASSERT_TRUE(w.write(dir.file("copy.gguf")).ok());
  auto g = GgufFile::open(dir.file("copy.gguf"));
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(g->keys(), f->keys());
  for (const std::string& k : f->keys()) expect_same(*f->find(k), *g->find(k), k);
  ASSERT_EQ(g->tensors().size(), f->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const TensorView& a = f->tensors()[i];
    const TensorView& b = g->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.ne, b.ne);
    ASSERT_EQ(a.nbytes, b.nbytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << a.name;
  }
}

TEST(GgufReal, LlamaSpmVocabulary) {
  auto f = GgufFile::open(dt::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), "llama");
  const auto tokens = *f->get_strings("tokenizer.ggml.tokens");
  ASSERT_GT(tokens.size(), 1000u);
  EXPECT_EQ(tokens[*f->get_uint("tokenizer.ggml.bos_token_id")], "<s>");
  EXPECT_EQ(f->get_floats("tokenizer.ggml.scores")->size(), tokens.size());
  EXPECT_EQ(f->get_ints("tokenizer.ggml.token_type")->size(), tokens.size());
}

TEST(GgufReal, EveryVocabularyFileOpens) {
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "phi-3", "falcon"}) {
    const std::string path =
        dt::shared_path(std::string("tokenizers/llama.cpp-vocab/ggml-vocab-") + name + ".gguf");
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_FALSE(f->get_strings("tokenizer.ggml.tokens")->empty()) << name;
  }
}

}  // namespace
}  // namespace duet

namespace duet {
namespace {

// A model file appears whole or not at all: a write that fails partway
// (here the file-size limit, as a full disk would) leaves neither the
// destination nor its temporary, and an existing destination untouched.
TEST(GgufWriter, AFailedWriteLeavesNoFileBehind) {
  duet::testing::TempDir dir;
  const std::string path = dir.file("model.gguf");
  GgufWriter w;
  w.set("general.name", GgufValue::of_string("big"));
  const std::vector<uint8_t> data(256 * 1024, 7);
  ASSERT_TRUE(w.add_tensor("t", DType::F32, {64 * 1024}, data.data(), data.size()).ok());
  { std::ofstream(path) << "old"; }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &limit);
    _exit(w.write(path).ok() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);  // the write reported its failure
  std::ifstream in(path);
  std::string old;
  in >> old;
  EXPECT_EQ(old, "old");
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left
  // Unlimited, the same write replaces the destination whole.
  ASSERT_TRUE(w.write(path).ok());
  EXPECT_TRUE(GgufFile::open(path).ok());
}

// Interrupted (Ctrl-C) between two tensors, the write leaves no temporary
// beside the destination, and the process still ends by the signal.
TEST(GgufWriter, AnInterruptedWriteLeavesNoFileBehind) {
  duet::testing::TempDir dir;
  const std::string path = dir.file("model.gguf");
  GgufWriter w;
  const std::vector<uint8_t> data(64 * 1024, 7);
  for (const char* name : {"a", "b"}) ASSERT_TRUE(w.add_tensor(name, DType::F32, {16 * 1024}, data.data(), data.size()).ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // After the first tensor is written: the temporary holds half a model.
    (void)w.write(path, [](uint64_t, uint64_t) { raise(SIGINT); });
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 0u);  // neither the destination nor its temporary
}

}  // namespace
}  // namespace duet
