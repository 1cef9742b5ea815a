// llama2.c import: real checkpoints against llama.cpp's conversion of the
// same files, the export versions 1 and 2, and corrupt inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "formats/gguf.h"
#include "formats/llama2c.h"
#include "formats/llama_import.h"
#include "formats/llama_names.h"
#include "formats/vocab_expect.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::shared_path;
using testing::TempDir;
namespace n = gguf_names;

const std::string kStoriesBin = "models/stories260K/stories260K.bin";
const std::string kStoriesTok = "models/stories260K/tok512.bin";
const std::string kStoriesGguf = "models/stories260K/stories260K.gguf";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_all(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}
void write_all(const std::string& path, const std::vector<uint8_t>& b) { write_all(path, b.data(), b.size()); }

void put_i32(std::vector<uint8_t>& b, size_t at, int32_t v) { std::memcpy(b.data() + at, &v, 4); }

template <class T>
void append(std::vector<uint8_t>& b, const T* p, size_t count) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(p);
  b.insert(b.end(), bytes, bytes + count * sizeof(T));
}
void append_weight(std::vector<uint8_t>& b, const Llama2cWeight& w) {
  append(b, w.data, static_cast<size_t>(w.elements()));
}

// Converts checkpoint + llama2.c tokenizer to a GGUF in `dir` and opens it.
GgufFile convert(const std::string& bin, const std::string& tok, const TempDir& dir) {
  auto ck = read_llama2c_checkpoint(bin);
  EXPECT_TRUE(ck.ok()) << ck.error().message;
  auto t = read_llama2c_tokenizer(tok);
  EXPECT_TRUE(t.ok()) << t.error().message;
  auto w = llama2c_gguf(*ck, vocab_from_llama2c(*t), "test");
  EXPECT_TRUE(w.ok()) << w.error().message;
  const std::string out = dir.file("out.gguf");
  const Status s = w->write(out);
  EXPECT_TRUE(s.ok()) << s.error().message;
  auto g = GgufFile::open(out);
  EXPECT_TRUE(g.ok()) << g.error().message;
  return std::move(g).value();
}

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(Llama2c, Stories260KConfig) {
  auto ck = read_llama2c_checkpoint(shared_path(kStoriesBin));
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const ModelConfig& c = ck->config;
  EXPECT_EQ(ck->version, 0);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.ffn_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.ctx_len, 512);
  EXPECT_TRUE(c.tied_output);
  EXPECT_FALSE(ck->wcls.has_value());
  ASSERT_EQ(ck->layers.size(), 5u);
  EXPECT_EQ(ck->layers[0].wk.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(ck->layers[4].w2.shape, (std::vector<int64_t>{64, 172}));
}

// Every tensor of llama.cpp's conversion of the same files is byte-equal to
// ours; its output.weight is the shared embedding, which we leave tied.
TEST(Llama2c, Stories260KMatchesLlamaCppConversion) {
  TempDir dir;
  const GgufFile ours = convert(shared_path(kStoriesBin), shared_path(kStoriesTok), dir);
  auto ref = GgufFile::open(shared_path(kStoriesGguf));
  ASSERT_TRUE(ref.ok()) << ref.error().message;

  EXPECT_EQ(ours.tensors().size(), ref->tensors().size() - 1);
  EXPECT_EQ(ours.tensor(n::kOutput), nullptr);
  for (const TensorView& r : ref->tensors()) {
    const std::string name = r.name == n::kOutput ? n::kTokenEmbd : r.name;
    const TensorView* t = ours.tensor(name);
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_EQ(t->dtype, DType::F32) << r.name;
    EXPECT_EQ(t->n_dims, r.n_dims) << r.name;
    EXPECT_EQ(t->ne, r.ne) << r.name;
    EXPECT_TRUE(same_bytes(*t, r)) << r.name;
  }

  testing::expect_same_llama_vocab(ours, *ref);
  EXPECT_EQ(*ours.get_string(n::kTokModel), "llama");
  EXPECT_EQ(*ours.get_string(n::kArchitecture), "llama");

  // Hyper-parameters agree, except the context length the reference
  // converter does not take from the checkpoint (it writes 128).
  for (const std::string& s : {n::kEmbeddingLength, n::kBlockCount, n::kFeedForwardLength,
                               n::kHeadCount, n::kHeadCountKv, n::kRopeDimCount}) {
    const std::string k = n::key("llama", s);
    EXPECT_EQ(*ours.get_uint(k), *ref->get_uint(k)) << k;
  }
  EXPECT_EQ(*ours.get_uint(n::key("llama", n::kContextLength)), 512u);
  EXPECT_FLOAT_EQ(static_cast<float>(*ours.get_float(n::key("llama", n::kRmsEps))),
                  static_cast<float>(*ref->get_float(n::key("llama", n::kRmsEps))));
  EXPECT_EQ(*ours.get_float(n::key("llama", n::kRopeFreqBase)), 10000.0);
  EXPECT_EQ(*ours.get_uint(n::kFileType), 0u);
  EXPECT_TRUE(*ours.get_bool(n::kTokAddBos));
  EXPECT_FALSE(*ours.get_bool(n::kTokAddEos));
}

// aidreams260K has no reference GGUF. The layout is checked through the
// legacy freq_cis tables: the importer skips them, and they must sit exactly
// where it believes they do (cos/sin of pos * 10000^(-2i/head_size)).
TEST(Llama2c, Aidreams260K) {
  const std::string bin = shared_path("models/aidreams260K/aidreams260K.bin");
  auto ck = read_llama2c_checkpoint(bin);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const ModelConfig& c = ck->config;
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.ctx_len, 128);
  EXPECT_TRUE(c.tied_output);

  const int hs = c.head_dim;
  const float* freq_real = ck->rms_final.data + c.dim;
  const float* freq_imag = freq_real + c.ctx_len * hs / 2;
  for (int pos = 0; pos < c.ctx_len; pos += 7) {
    for (int i = 0; i < hs / 2; ++i) {
      const double angle = pos * std::pow(10000.0, -2.0 * i / hs);
      EXPECT_NEAR(freq_real[pos * hs / 2 + i], std::cos(angle), 1e-4) << pos << " " << i;
      EXPECT_NEAR(freq_imag[pos * hs / 2 + i], std::sin(angle), 1e-4) << pos << " " << i;
    }
  }

  TempDir dir;
  const GgufFile g = convert(bin, shared_path("models/aidreams260K/tok512.bin"), dir);
  EXPECT_EQ(g.tensors().size(), 2u + 9u * 4u);
  EXPECT_EQ(*g.get_uint(n::key("llama", n::kContextLength)), 128u);
  EXPECT_EQ(*g.get_uint(n::key("llama", n::kHeadCountKv)), 4u);
  const TensorView* q = g.tensor(n::blk(3, n::kAttnQ));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne[0], 64);
  EXPECT_EQ(q->ne[1], 64);
  EXPECT_EQ(std::memcmp(q->data, ck->layers[3].wq.data, q->nbytes), 0);
  const auto tokens = *g.get_strings(n::kTokTokens);
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
}

// The same Llama 2 vocabulary as tokenizer.bin and as tokenizer.model maps to
// the same GGUF arrays.
TEST(Llama2c, TokenizerBinMatchesSentencePieceModel) {
  auto bin = read_llama2c_tokenizer(shared_path("tokenizers/llama2/tokenizer.bin"));
  ASSERT_TRUE(bin.ok()) << bin.error().message;
  auto model = read_spm_model(shared_path("tokenizers/llama2/tokenizer.model"));
  ASSERT_TRUE(model.ok()) << model.error().message;
  const LlamaVocab a = vocab_from_llama2c(*bin);
  auto b = vocab_from_spm(*model, "tokenizer.model");
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(a.tokens.size(), 32000u);
  EXPECT_EQ(a.tokens, b->tokens);
  EXPECT_EQ(a.types, b->types);
  expect_same_bits(a.scores, b->scores);
  EXPECT_EQ(a.bos_id, b->bos_id);
  EXPECT_EQ(a.eos_id, b->eos_id);
  EXPECT_EQ(a.unk_id, b->unk_id);
}

// stories260K_q8.bin (export version 2, group size 4) is stories260K
// quantized: norms are exact, matrices within half a quantization step.
TEST(Llama2c, Version2Q8MatchesFp32) {
  auto q8 = read_llama2c_checkpoint(shared_path("models/stories260K/stories260K_q8.bin"));
  ASSERT_TRUE(q8.ok()) << q8.error().message;
  auto f32 = read_llama2c_checkpoint(shared_path(kStoriesBin));
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(q8->version, 2);
  EXPECT_EQ(q8->group_size, 4);
  EXPECT_EQ(q8->config.ctx_len, 512);

  auto exact = [](const Llama2cWeight& a, const Llama2cWeight& b) {
    ASSERT_EQ(a.shape, b.shape);
    EXPECT_EQ(std::memcmp(a.data, b.data, static_cast<size_t>(a.elements()) * 4), 0);
  };
  auto close = [](const Llama2cWeight& a, const Llama2cWeight& b) {
    ASSERT_EQ(a.shape, b.shape);
    const int64_t n = a.elements();
    for (int64_t g = 0; g < n; g += 4) {
      float amax = 0;
      for (int64_t i = g; i < g + 4; ++i) amax = std::max(amax, std::fabs(b.data[i]));
      for (int64_t i = g; i < g + 4; ++i)
        ASSERT_LE(std::fabs(a.data[i] - b.data[i]), amax / 127.0f * 0.501f + 1e-7f) << i;
    }
  };
  exact(q8->rms_final, f32->rms_final);
  close(q8->token_embedding, f32->token_embedding);
  for (size_t l = 0; l < 5; ++l) {
    const Llama2cLayer &a = q8->layers[l], &b = f32->layers[l];
    exact(a.rms_att, b.rms_att);
    exact(a.rms_ffn, b.rms_ffn);
    for (auto m : {&Llama2cLayer::wq, &Llama2cLayer::wk, &Llama2cLayer::wv, &Llama2cLayer::wo,
                   &Llama2cLayer::w1, &Llama2cLayer::w2, &Llama2cLayer::w3})
      close(a.*m, b.*m);
  }
}

// Builds an export-version-1 file (and a legacy file with a separate
// classifier) from stories260K's weights, to check the other layouts.
std::vector<uint8_t> version1_bytes(const Llama2cCheckpoint& ck, const Llama2cWeight* wcls) {
  std::vector<uint8_t> b(256, 0);
  const ModelConfig& c = ck.config;
  put_i32(b, 0, 0x616b3432);
  put_i32(b, 4, 1);
  const int32_t params[7] = {c.dim, c.ffn_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.n_vocab, c.ctx_len};
  std::memcpy(b.data() + 8, params, sizeof params);
  b[36] = wcls ? 0 : 1;
  for (auto& l : ck.layers) append_weight(b, l.rms_att);
  for (auto& l : ck.layers) append_weight(b, l.rms_ffn);
  append_weight(b, ck.rms_final);
  append_weight(b, ck.token_embedding);
  for (auto m : {&Llama2cLayer::wq, &Llama2cLayer::wk, &Llama2cLayer::wv, &Llama2cLayer::wo,
                 &Llama2cLayer::w1, &Llama2cLayer::w2, &Llama2cLayer::w3})
    for (auto& l : ck.layers) append_weight(b, l.*m);
  if (wcls) append_weight(b, *wcls);
  return b;
}

void expect_same_weights(const Llama2cCheckpoint& a, const Llama2cCheckpoint& b) {
  auto same = [](const Llama2cWeight& x, const Llama2cWeight& y) {
    ASSERT_EQ(x.shape, y.shape);
    EXPECT_EQ(std::memcmp(x.data, y.data, static_cast<size_t>(x.elements()) * 4), 0);
  };
  same(a.token_embedding, b.token_embedding);
  same(a.rms_final, b.rms_final);
  for (size_t l = 0; l < a.layers.size(); ++l)
    for (auto m : {&Llama2cLayer::rms_att, &Llama2cLayer::rms_ffn, &Llama2cLayer::wq, &Llama2cLayer::wk,
                   &Llama2cLayer::wv, &Llama2cLayer::wo, &Llama2cLayer::w1, &Llama2cLayer::w2,
                   &Llama2cLayer::w3})
      same(a.layers[l].*m, b.layers[l].*m);
}

TEST(Llama2c, Version1ReadsLikeLegacy) {
  auto legacy = read_llama2c_checkpoint(shared_path(kStoriesBin));
  ASSERT_TRUE(legacy.ok());
  TempDir dir;
  write_all(dir.file("v1.bin"), version1_bytes(*legacy, nullptr));
  auto v1 = read_llama2c_checkpoint(dir.file("v1.bin"));
  ASSERT_TRUE(v1.ok()) << v1.error().message;
  EXPECT_EQ(v1->version, 1);
  EXPECT_TRUE(v1->config.tied_output);
  expect_same_weights(*legacy, *v1);
}

TEST(Llama2c, SeparateClassifierIsWrittenAsOutput) {
  auto legacy = read_llama2c_checkpoint(shared_path(kStoriesBin));
  ASSERT_TRUE(legacy.ok());
  std::vector<float> cls(512 * 64);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (float& x : cls) x = normal(rng);
  const Llama2cWeight wcls{{512, 64}, cls.data()};

  TempDir dir;
  std::vector<uint8_t> v0 = read_bytes(shared_path(kStoriesBin));
  put_i32(v0, 20, -512);  // legacy: negative vocab_size = separate classifier
  append(v0, cls.data(), cls.size());
  write_all(dir.file("v0.bin"), v0);
  write_all(dir.file("v1.bin"), version1_bytes(*legacy, &wcls));

  for (const char* file : {"v0.bin", "v1.bin"}) {
    auto ck = read_llama2c_checkpoint(dir.file(file));
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    EXPECT_FALSE(ck->config.tied_output);
    EXPECT_EQ(ck->config.n_vocab, 512);
    auto tok = read_llama2c_tokenizer(shared_path(kStoriesTok));
    auto w = llama2c_gguf(*ck, vocab_from_llama2c(*tok), "cls");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->write(dir.file("cls.gguf")).ok());
    auto g = GgufFile::open(dir.file("cls.gguf"));
    ASSERT_TRUE(g.ok()) << g.error().message;
    const TensorView* out = g->tensor(n::kOutput);
    ASSERT_NE(out, nullptr) << file;
    EXPECT_EQ(out->ne[0], 64);
    EXPECT_EQ(out->ne[1], 512);
    EXPECT_EQ(std::memcmp(out->data, cls.data(), out->nbytes), 0) << file;
  }
}

TEST(Llama2c, VocabSizeMismatchIsAnError) {
  auto ck = read_llama2c_checkpoint(shared_path(kStoriesBin));
  auto tok = read_llama2c_tokenizer(shared_path("tokenizers/llama2/tokenizer.bin"));
  ASSERT_TRUE(ck.ok() && tok.ok());
  auto w = llama2c_gguf(*ck, vocab_from_llama2c(*tok), "x");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("32000"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("512"), std::string::npos) << w.error().message;
}

// ---- corrupt checkpoints

std::string checkpoint_error(const TempDir& dir, const std::vector<uint8_t>& bytes) {
  const std::string path = dir.file("bad.bin");
  write_all(path, bytes);
  return testing::failure_message(read_llama2c_checkpoint(path));
}

TEST(Llama2c, TruncatedCheckpointIsAnError) {
  const std::vector<uint8_t> full = read_bytes(shared_path(kStoriesBin));
  TempDir dir;
  for (size_t cut : {size_t{0}, size_t{3}, size_t{27}, size_t{28}, size_t{1000}, full.size() / 2,
                     full.size() - 4, full.size() - 1}) {
    const std::string e = checkpoint_error(dir, std::vector<uint8_t>(full.begin(), full.begin() + cut));
    EXPECT_NE(e.find(std::to_string(cut)), std::string::npos) << cut << ": " << e;
    if (cut >= 28) {
      EXPECT_NE(e.find("should be " + std::to_string(full.size()) + " bytes"), std::string::npos) << e;
    }
  }
  std::vector<uint8_t> longer = full;
  longer.push_back(0);
  EXPECT_NE(checkpoint_error(dir, longer).find("trailing"), std::string::npos);
}

TEST(Llama2c, BadHeadersAreErrors) {
  const std::vector<uint8_t> full = read_bytes(shared_path(kStoriesBin));
  TempDir dir;
  struct Case {
    size_t field;
    int32_t value;
    const char* expect;
  };
  const Case cases[] = {
      {0, 0, "dim = 0"},
      {0, -64, "dim = -64"},
      {1, -1, "hidden_dim = -1"},
      {2, 0, "n_layers = 0"},
      {3, 7, "not a multiple of n_heads"},
      {4, 3, "not a multiple of n_kv_heads"},
      {4, 0, "n_kv_heads = 0"},
      {5, std::numeric_limits<int32_t>::min(), "vocab_size"},
      {6, -5, "seq_len = -5"},
      {3, 64, "odd"},  // head size 1
      {0, 1 << 20, "should be"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = full;
    put_i32(b, c.field * 4, c.value);
    const std::string e = checkpoint_error(dir, b);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.field << "=" << c.value << ": " << e;
  }
  // Every dimension huge: the size computation must not wrap around.
  std::vector<uint8_t> b = full;
  for (size_t f = 0; f < 7; ++f) put_i32(b, f * 4, f == 3 || f == 4 ? 2 : 0x7ffffffc);
  EXPECT_NE(checkpoint_error(dir, b).find("too large"), std::string::npos) << checkpoint_error(dir, b);
}

TEST(Llama2c, BadExportHeadersAreErrors) {
  std::vector<uint8_t> q8 = read_bytes(shared_path("models/stories260K/stories260K_q8.bin"));
  TempDir dir;
  std::vector<uint8_t> b = q8;
  put_i32(b, 4, 3);
  EXPECT_NE(checkpoint_error(dir, b).find("unsupported llama2.c export version 3"), std::string::npos);
  b = q8;
  put_i32(b, 37, 0);
  EXPECT_NE(checkpoint_error(dir, b).find("group_size = 0"), std::string::npos);
  b = q8;
  put_i32(b, 37, 3);
  EXPECT_NE(checkpoint_error(dir, b).find("does not divide"), std::string::npos);
  b = q8;
  put_i32(b, 37, 8);  // divides everything, but the scales then take fewer bytes
  EXPECT_NE(checkpoint_error(dir, b).find("should be"), std::string::npos);
  EXPECT_NE(checkpoint_error(dir, std::vector<uint8_t>(q8.begin(), q8.begin() + 100)).find("256"),
            std::string::npos);
  EXPECT_NE(checkpoint_error(dir, std::vector<uint8_t>(q8.begin(), q8.end() - 1)).find("truncated"),
            std::string::npos);
}

// Random bytes after a plausible header: an error, never a crash.
TEST(Llama2c, RandomCheckpointsAreErrors) {
  TempDir dir;
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> b(static_cast<size_t>(rng() % 600));
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    if (b.size() >= 4 && i % 2) put_i32(b, 0, 0x616b3432);
    if (b.size() >= 8 && i % 4 == 1) put_i32(b, 4, 1 + i % 8 / 4);
    checkpoint_error(dir, b);
  }
}

// ---- corrupt tokenizers

std::string tokenizer_error(const TempDir& dir, const std::vector<uint8_t>& bytes) {
  const std::string path = dir.file("bad_tok.bin");
  write_all(path, bytes);
  return testing::failure_message(read_llama2c_tokenizer(path));
}

TEST(Llama2c, Tok512) {
  auto t = read_llama2c_tokenizer(shared_path(kStoriesTok));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->max_token_length, 7);
  ASSERT_EQ(t->pieces.size(), 512u);
  EXPECT_EQ(t->pieces[1], "\n<s>\n");
  const LlamaVocab v = vocab_from_llama2c(*t);
  EXPECT_EQ(v.tokens[259], "\xE2\x96\x81t");  // "▁t"
  EXPECT_EQ(v.types[0], 2);
  EXPECT_EQ(v.types[1], 3);
  EXPECT_EQ(v.types[258], 6);
  EXPECT_EQ(v.types[259], 1);
}

TEST(Llama2c, CorruptTokenizersAreErrors) {
  const std::vector<uint8_t> full = read_bytes(shared_path(kStoriesTok));
  TempDir dir;
  EXPECT_NE(tokenizer_error(dir, {}).find("too small"), std::string::npos);
  EXPECT_NE(tokenizer_error(dir, {7, 0, 0, 0}).find("no tokens"), std::string::npos);
  // Cuts inside a token header (4 + 8 + 5 = after "<unk>") and inside its text.
  for (size_t cut : {size_t{2}, size_t{6}, size_t{17 + 3}, size_t{10}, full.size() - 1}) {
    const std::string e = tokenizer_error(dir, std::vector<uint8_t>(full.begin(), full.begin() + cut));
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("past the end") != std::string::npos ||
                e.find("too small") != std::string::npos)
        << cut << ": " << e;
  }
  std::vector<uint8_t> b = full;
  put_i32(b, 4 + 4, 1 << 30);  // token 0's length far past the end
  EXPECT_NE(tokenizer_error(dir, b).find("past the end"), std::string::npos);
  b = full;
  put_i32(b, 4 + 4, -3);
  EXPECT_NE(tokenizer_error(dir, b).find("length -3"), std::string::npos);
  b = full;
  put_i32(b, 0, -1);
  EXPECT_NE(tokenizer_error(dir, b).find("max_token_length"), std::string::npos);
}

}  // namespace
}  // namespace duet
