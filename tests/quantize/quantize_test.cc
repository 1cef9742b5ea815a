// duet quantize's policy and file rewrite: which tensor gets which type, the
// bytes written equal what the reference quantizers produce, metadata is
// preserved, and the importance-weighted quantizers do what they claim.
#include "quantize/quantize_gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/half.h"
#include "formats/file_type.h"
#include "formats/llama_names.h"
#include "kernels/quant.h"
#include "quantize/weighted_quant.h"
#include "test_util.h"

namespace duet {
namespace {

namespace n = gguf_names;
using testing::TempDir;

TensorView matrix(const std::string& name, int64_t row, int64_t rows, DType t = DType::F32) {
  TensorView v;
  v.name = name;
  v.dtype = t;
  v.n_dims = 2;
  v.ne = {row, rows, 1, 1};
  return v;
}

TEST(QuantizePolicy, TypesPerTensor) {
  QuantizeOptions o;
  o.target = DType::Q4_K;
  TensorView norm = matrix("blk.0.attn_norm.weight", 256, 1);
  norm.n_dims = 1;
  EXPECT_EQ(choose_tensor_type(norm, o).type, DType::F32);
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.attn_q.weight", 512, 8), o).type, DType::Q4_K);
  EXPECT_EQ(choose_tensor_type(matrix(n::kTokenEmbd, 512, 8), o).type, DType::Q8_0);
  EXPECT_EQ(choose_tensor_type(matrix(n::kOutput, 512, 8), o).type, DType::Q8_0);
  // Rows that do not fill 256-element super-blocks: Q4_1 if they fill 32s, else F16.
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_up.weight", 64, 8), o).type, DType::Q4_1);
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_down.weight", 172, 8), o).type, DType::F16);
  EXPECT_EQ(choose_tensor_type(matrix(n::kOutput, 172, 8), o).type, DType::F16);

  o.target = DType::Q6_K;
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_up.weight", 64, 8), o).type, DType::Q8_0);
  // The types below 4.5 bits fall back to IQ4_NL, as llama-quantize's mixes do.
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::TQ1_0, DType::TQ2_0}) {
    o.target = t;
    EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_up.weight", 384, 8), o).type, DType::IQ4_NL) << dtype_name(t);
    EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_up.weight", 512, 8), o).type, t);
    EXPECT_EQ(choose_tensor_type(matrix(n::kOutput, 512, 8), o).type, DType::Q8_0);
  }
  for (DType t : {DType::Q5_0, DType::Q5_1, DType::IQ4_NL}) {
    o.target = t;
    EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_up.weight", 96, 8), o).type, t);
    EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_up.weight", 100, 8), o).type, DType::F16);
  }
  o.target = DType::Q8_0;
  EXPECT_EQ(choose_tensor_type(matrix(n::kTokenEmbd, 64, 8), o).type, DType::Q8_0);
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_down.weight", 172, 8), o).type, DType::F16);
  o.target = DType::F32;
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_down.weight", 172, 8, DType::F16), o).type,
            DType::F32);
  o.target = DType::BF16;
  EXPECT_EQ(choose_tensor_type(matrix("blk.0.ffn_down.weight", 172, 8), o).type, DType::BF16);

  o.target = DType::Q4_0;
  o.keep = {"blk.*.ffn_down.weight", "attn_(q|k)"};
  EXPECT_EQ(choose_tensor_type(matrix("blk.3.ffn_down.weight", 64, 8), o).type, DType::F32);
  EXPECT_EQ(choose_tensor_type(matrix("blk.3.attn_k.weight", 64, 8), o).type, DType::F32);
  EXPECT_EQ(choose_tensor_type(matrix("blk.3.attn_v.weight", 64, 8), o).type, DType::Q4_0);
  EXPECT_EQ(choose_tensor_type(matrix("blk.3.attn_q.weight", 64, 8, DType::F16), o).type,
            DType::F16);
}

TEST(QuantizePolicy, Patterns) {
  EXPECT_TRUE(name_matches("blk.1?.*", "blk.12.attn_q.weight"));
  EXPECT_FALSE(name_matches("blk.1?.*", "output.weight"));
  EXPECT_TRUE(name_matches("output", "output.weight"));  // regex search
  EXPECT_TRUE(name_matches("^blk\\.0\\.", "blk.0.ffn_up.weight"));
  EXPECT_FALSE(name_matches("^blk\\.0\\.", "blk.10.ffn_up.weight"));
  EXPECT_TRUE(name_matches("*_norm.weight", "output_norm.weight"));  // glob; invalid regex
  EXPECT_FALSE(name_matches("*_norm.weight", "output.weight"));
}

TEST(QuantizePolicy, FileTypes) {
  EXPECT_EQ(*llama_file_type(DType::F32), 0u);
  EXPECT_EQ(*llama_file_type(DType::F16), 1u);
  EXPECT_EQ(*llama_file_type(DType::Q4_0), 2u);
  EXPECT_EQ(*llama_file_type(DType::Q8_0), 7u);
  EXPECT_EQ(*llama_file_type(DType::Q4_K), 14u);
  EXPECT_EQ(*llama_file_type(DType::Q6_K), 18u);
  EXPECT_EQ(*llama_file_type(DType::BF16), 32u);
  EXPECT_FALSE(llama_file_type(DType::Q8_K).ok());
  EXPECT_FALSE(is_quantize_target(DType::Q8_K));
  EXPECT_FALSE(is_quantize_target(DType::I32));
}

// ---- File rewrite ----------------------------------------------------------

struct Source {
  std::string name;
  DType dtype;
  std::vector<int64_t> ne;
  std::vector<float> values;  // what the tensor holds, as floats
  std::vector<uint8_t> bytes;
};

std::vector<Source> make_sources() {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 0.05f);
  auto make = [&](const std::string& name, DType t, std::vector<int64_t> ne) {
    Source s{name, t, ne, {}, {}};
    int64_t count = 1;
    for (int64_t e : ne) count *= e;
    s.values.resize(static_cast<size_t>(count));
    for (float& v : s.values) v = g(rng);
    if (t == DType::F16) {
      s.bytes.resize(s.values.size() * 2);
      auto* h = reinterpret_cast<uint16_t*>(s.bytes.data());
      for (size_t i = 0; i < s.values.size(); ++i) {
        h[i] = f32_to_f16(s.values[i]);
        s.values[i] = f16_to_f32(h[i]);
      }
    } else {
      s.bytes.resize(s.values.size() * 4);
      std::memcpy(s.bytes.data(), s.values.data(), s.bytes.size());
    }
    return s;
  };
  return {
      make(n::kTokenEmbd, DType::F32, {256, 12}),
      make("blk.0.attn_norm.weight", DType::F32, {256}),
      make("blk.0.attn_q.weight", DType::F32, {512, 6}),
      make("blk.0.attn_k.weight", DType::F16, {256, 5}),
      make("blk.0.ffn_up.weight", DType::F32, {96, 7}),
      make("blk.0.ffn_down.weight", DType::F32, {40, 3}),
      make(n::kOutput, DType::F32, {256, 12}),
  };
}

std::vector<std::pair<std::string, GgufValue>> source_metadata() {
  return {
      {n::kArchitecture, GgufValue::of_string("llama")},
      {n::kName, GgufValue::of_string("quantize test")},
      {n::kFileType, GgufValue::of_u32(0)},
      {"test.i8", GgufValue::of_i8(-5)},
      {"test.f64", GgufValue::of_f64(0.125)},
      {"test.floats", GgufValue::of_f32s({1.5f, -2.25f})},
      {"test.words", GgufValue::of_strings({"a", "bc", ""})},
      {"test.flag", GgufValue::of_bool(true)},
  };
}

std::string write_source(const TempDir& dir, const std::vector<Source>& sources) {
  GgufWriter w;
  for (auto& [k, v] : source_metadata()) w.set(k, v);
  for (const Source& s : sources)
    EXPECT_TRUE(w.add_tensor(s.name, s.dtype, s.ne, s.bytes.data(), s.bytes.size()).ok());
  const std::string path = dir.file("in.gguf");
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

void expect_same_value(const GgufValue& a, const GgufValue& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  EXPECT_EQ(a.u64, b.u64) << where;
  EXPECT_EQ(a.i64, b.i64) << where;
  EXPECT_EQ(a.f64, b.f64) << where;
  EXPECT_EQ(a.b, b.b) << where;
  EXPECT_EQ(a.str, b.str) << where;
  ASSERT_EQ(a.items.size(), b.items.size()) << where;
  for (size_t i = 0; i < a.items.size(); ++i) expect_same_value(a.items[i], b.items[i], where);
}

// What the rewritten tensor must hold, computed straight from the reference
// quantizers (not through quantize_gguf's own conversion helpers).
std::vector<uint8_t> expected_bytes(const Source& s, DType to, const float* importance) {
  if (to == s.dtype) return s.bytes;
  const int64_t k = s.ne[0];
  const size_t rows = s.values.size() / static_cast<size_t>(k);
  const size_t out_row = *row_bytes(to, k);
  std::vector<uint8_t> out(out_row * rows);
  for (size_t r = 0; r < rows; ++r) {
    const float* x = s.values.data() + r * static_cast<size_t>(k);
    uint8_t* y = out.data() + r * out_row;
    if (to == DType::F16 || to == DType::BF16) {
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t h = to == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
    } else if (to == DType::F32) {
      std::memcpy(y, x, out_row);
    } else if (importance && to == DType::Q4_0) {
      quantize_row_q4_0_weighted(x, y, k, importance);
    } else if (importance && to == DType::Q4_1) {
      quantize_row_q4_1_weighted(x, y, k, importance);
    } else {
      EXPECT_TRUE(quantize_row(to, x, y, k, importance).ok());
    }
  }
  return out;
}

// A rewrite of the make_sources() model: its file, a pool, the options.
struct Rewrite {
  TempDir dir;
  Result<GgufFile> in = GgufFile::open(write_source(dir, make_sources()));
  ThreadPool pool{1};
  QuantizeOptions o;

  Result<QuantizeSummary> to(const std::string& out) { return quantize_gguf(*in, out, o, pool, {}); }
};

void check_rewrite(DType target, const ChannelImportance* importance) {
  SCOPED_TRACE(std::string(dtype_name(target)) + (importance ? " with importance" : ""));
  TempDir dir;
  const std::vector<Source> sources = make_sources();
  auto in = GgufFile::open(write_source(dir, sources));
  ASSERT_TRUE(in.ok()) << in.error().message;
  QuantizeOptions o;
  o.target = target;
  o.importance = importance;
  ThreadPool pool(2);
  size_t progress_calls = 0;
  auto sum = quantize_gguf(*in, dir.file("out.gguf"), o, pool,
                           [&](const QuantizeProgress& p) {
                             EXPECT_EQ(p.index, progress_calls++);
                             EXPECT_EQ(p.count, sources.size());
                           });
  ASSERT_TRUE(sum.ok()) << sum.error().message;
  EXPECT_EQ(progress_calls, sources.size());
  auto out = GgufFile::open(dir.file("out.gguf"));
  ASSERT_TRUE(out.ok()) << out.error().message;

  ASSERT_EQ(out->keys(), in->keys());  // same keys, same order
  for (const std::string& key : in->keys()) {
    if (key == n::kFileType) continue;
    expect_same_value(*in->find(key), *out->find(key), key);
  }
  EXPECT_EQ(*out->get_uint(n::kFileType), *llama_file_type(target));

  ASSERT_EQ(out->tensors().size(), sources.size());
  uint64_t bytes_out = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Source& s = sources[i];
    const TensorView& t = out->tensors()[i];
    ASSERT_EQ(t.name, s.name);
    ASSERT_EQ(t.n_dims, static_cast<int>(s.ne.size())) << s.name;
    for (size_t d = 0; d < s.ne.size(); ++d) EXPECT_EQ(t.ne[d], s.ne[d]) << s.name;
    const DType want = choose_tensor_type(in->tensors()[i], o).type;
    ASSERT_EQ(t.dtype, want) << s.name;
    const float* imp = nullptr;
    if (importance)
      if (auto it = importance->find(s.name); it != importance->end()) imp = it->second.data();
    const std::vector<uint8_t> expect = expected_bytes(s, want, imp);
    ASSERT_EQ(t.nbytes, expect.size()) << s.name;
    EXPECT_EQ(std::memcmp(t.data, expect.data(), expect.size()), 0) << s.name;
    bytes_out += t.nbytes;
  }
  EXPECT_EQ(sum->bytes_out, bytes_out);
}

TEST(QuantizeFile, EveryTargetRereadsAsTheReferenceQuantizersWrite) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                  DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS,
                  DType::TQ1_0, DType::TQ2_0, DType::F16, DType::BF16, DType::F32})
    check_rewrite(t, nullptr);
}

TEST(QuantizeFile, ImportanceReachesTheQuantizers) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 4.f);
  ChannelImportance imp;
  for (const Source& s : make_sources()) {
    if (s.ne.size() < 2) continue;
    std::vector<float>& v = imp[s.name];
    v.resize(static_cast<size_t>(s.ne[0]));
    for (float& x : v) x = u(rng) * u(rng);
  }
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS})
    check_rewrite(t, &imp);

  // Weighted and unweighted files differ, so the importance was used.
  Rewrite w;
  ASSERT_TRUE(w.in.ok());
  w.o.target = DType::Q4_K;
  ASSERT_TRUE(w.to(w.dir.file("plain.gguf")).ok());
  w.o.importance = &imp;
  ASSERT_TRUE(w.to(w.dir.file("weighted.gguf")).ok());
  auto plain = GgufFile::open(w.dir.file("plain.gguf"));
  auto weighted = GgufFile::open(w.dir.file("weighted.gguf"));
  const TensorView* a = plain->tensor("blk.0.attn_q.weight");
  const TensorView* b = weighted->tensor("blk.0.attn_q.weight");
  EXPECT_NE(std::memcmp(a->data, b->data, a->nbytes), 0);
}

TEST(QuantizeFile, Errors) {
  Rewrite w;
  ASSERT_TRUE(w.in.ok());
  w.o.target = DType::Q4_0;
  ChannelImportance imp{{"blk.0.attn_q.weight", std::vector<float>(100, 1.f)}};
  w.o.importance = &imp;
  EXPECT_NE(testing::failure_message(w.to(w.dir.file("out.gguf"))).find("blk.0.attn_q.weight"),
            std::string::npos);

  w.o.importance = nullptr;
  w.o.target = DType::Q8_K;
  EXPECT_FALSE(w.to(w.dir.file("out.gguf")).ok());
  w.o.target = DType::Q4_0;
  EXPECT_FALSE(w.to(w.dir.path() + "/no/such/dir/out.gguf").ok());
}

// ---- Weighted 32-element quantizers ----------------------------------------

double weighted_error(DType t, const std::vector<float>& x, const void* q,
                      const std::vector<float>& w, size_t begin, size_t end) {
  std::vector<float> y(x.size());
  EXPECT_TRUE(dequantize_row(t, q, y.data(), static_cast<int64_t>(x.size())).ok());
  double e = 0;
  for (size_t i = begin; i < end; ++i) e += w[i] * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return e;
}

TEST(WeightedQuant, NoBlockWorseThanTheReferenceAndMostBetter) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  constexpr int64_t k = 32 * 64;
  std::vector<float> x(k), w(k);
  for (int64_t i = 0; i < k; ++i) {
    x[i] = g(rng) * (i % 7 == 0 ? 4.f : 1.f);  // some outliers
    w[i] = u(rng) < 0.2f ? 20.f * u(rng) : 0.1f * u(rng);  // a few important channels
  }
  for (DType t : {DType::Q4_0, DType::Q4_1}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<uint8_t> ref(*row_bytes(t, k)), ours(*row_bytes(t, k));
    ASSERT_TRUE(quantize_row(t, x.data(), ref.data(), k).ok());
    (t == DType::Q4_0 ? quantize_row_q4_0_weighted : quantize_row_q4_1_weighted)(
        x.data(), ours.data(), k, w.data());
    int better = 0;
    double total_ref = 0, total_ours = 0;
    for (size_t b = 0; b < k / 32; ++b) {
      const double e_ref = weighted_error(t, x, ref.data(), w, b * 32, b * 32 + 32);
      const double e_ours = weighted_error(t, x, ours.data(), w, b * 32, b * 32 + 32);
      EXPECT_LE(e_ours, e_ref * (1 + 1e-5) + 1e-9) << "block " << b;
      better += e_ours < 0.99 * e_ref;
      total_ref += e_ref;
      total_ours += e_ours;
    }
    EXPECT_GT(better, k / 32 / 2);
    EXPECT_LT(total_ours, 0.8 * total_ref);
  }
}

TEST(WeightedQuant, ZeroImportanceAndConstantBlocks) {
  std::vector<float> x(64, 0.f), w(64, 0.f);
  for (int i = 32; i < 64; ++i) x[i] = 0.5f;  // a constant block
  for (DType t : {DType::Q4_0, DType::Q4_1}) {
    std::vector<uint8_t> q(*row_bytes(t, 64));
    (t == DType::Q4_0 ? quantize_row_q4_0_weighted : quantize_row_q4_1_weighted)(x.data(), q.data(),
                                                                                64, w.data());
    std::vector<float> y(64);
    ASSERT_TRUE(dequantize_row(t, q.data(), y.data(), 64).ok());
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 1e-3) << dtype_name(t) << " " << i;
  }
}

}  // namespace
}  // namespace duet
