// safetensors reader, config.json parser and Hugging Face import: good files
// read back exactly; every kind of bad input is one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "formats/hf_import.h"
#include "formats/safetensors.h"
#include "test_util.h"

namespace duet {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::write_file;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

// A safetensors file from a raw header text and data bytes.
std::string st_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// F32 tensors laid out back to back: name -> (shape, values).
struct StTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

std::string st_file(const std::vector<StTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const StTensor& t : tensors) {
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.values.size() * 4}}};
    data += floats(t.values);
  }
  return st_bytes(header.dump(), data);
}

std::string open_error(const std::string& path) {
  auto r = SafetensorsFile::open(path);
  return r.ok() ? std::string("(opened)") : r.error().message;
}

TEST(Safetensors, ReadsTensorsInPlace) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  write_file(path, st_file({{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {2}, {7, 8}}}));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->tensors().size(), 2u);
  const SafetensorsTensor* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  float v[6];
  std::memcpy(v, a->data, sizeof v);
  EXPECT_EQ(v[5], 6.0f);
  EXPECT_EQ(f->find("c"), nullptr);
}

TEST(Safetensors, AcceptsHalfTypesMetadataAndPadding) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[4,6]}}     )";
  write_file(path, st_bytes(header, std::string(6, '\x01')));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->find("h")->dtype, DType::F16);
  EXPECT_EQ(f->find("b")->dtype, DType::BF16);
}

struct BadCase {
  const char* what;
  std::string bytes;
  const char* expect;  // a piece of the error message
};

TEST(Safetensors, RejectsBadHeaders) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<BadCase> cases = {
      {"short file", "abc", "too short"},
      {"header length past the file", le64(1000) + "{}", "exceeds the 2 bytes"},
      {"huge header length", le64(~0ull) + "{}", "header length"},
      {"invalid JSON", st_bytes(R"({"t": [1, 2)", ""), "not valid JSON"},
      {"not an object", st_bytes("[1,2]", ""), "not a JSON object"},
      {"unknown dtype", st_bytes(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'w' has dtype I64"},
      {"offsets past the data", st_bytes("{" + ok_entry + "}", std::string(4, 0)), "outside the data region"},
      {"begin after end", st_bytes(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", std::string(8, 0)),
       "outside the data region"},
      {"size disagrees with shape", st_bytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(12, 0)),
       "needs 3 elements"},
      {"negative dimension", st_bytes(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 0)),
       "non-negative integer"},
      {"overflowing shape",
       st_bytes(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", std::string(8, 0)),
       "overflows"},
      {"overlapping tensors",
       st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                std::string(12, 0)),
       "overlap"},
      {"missing dtype", st_bytes(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, 0)), "no dtype"},
      {"offsets not a pair", st_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, 0)),
       "data_offsets [begin, end]"},
      {"entry not an object", st_bytes(R"({"t":5})", ""), "not an object"},
  };
  TempDir dir;
  for (const BadCase& c : cases) {
    const std::string path = dir.file("bad.safetensors");
    write_file(path, c.bytes);
    const std::string e = open_error(path);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.what << ": " << e;
    EXPECT_NE(e.find(path), std::string::npos) << c.what << ": error should name the file: " << e;
  }
}

// Every truncation and every single-byte change of a good file either opens
// or fails cleanly (the sanitizer build checks "cleanly").
TEST(Safetensors, SurvivesTruncationAndByteFlips) {
  TempDir dir;
  const std::string good = st_file({{"a", {2, 2}, {1, 2, 3, 4}}, {"b", {3}, {5, 6, 7}}});
  const std::string path = dir.file("m.safetensors");
  for (size_t n = 0; n < good.size(); ++n) {
    write_file(path, good.substr(0, n));
    EXPECT_FALSE(SafetensorsFile::open(path).ok()) << "truncated to " << n;
  }
  for (size_t i = 0; i < 8 + 60 && i < good.size(); ++i) {
    for (int flip : {0x01, 0x20, 0x80}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      write_file(path, bad);
      auto f = SafetensorsFile::open(path);
      if (f.ok()) {
        for (const SafetensorsTensor& t : f->tensors()) EXPECT_LE(t.nbytes, bad.size());
      }
    }
  }
}

// ---- sharded checkpoints

std::string write_sharded(const TempDir& dir, const json& weight_map) {
  write_file(dir.file("s1.safetensors"), st_file({{"x", {2}, {1, 2}}}));
  write_file(dir.file("s2.safetensors"), st_file({{"y", {1}, {3}}, {"z", {1}, {4}}}));
  write_file(dir.file("model.safetensors.index.json"), json{{"weight_map", weight_map}}.dump());
  return dir.path();
}

TEST(SafetensorsCheckpoint, ReadsShardsThroughTheIndex) {
  TempDir dir;
  write_sharded(dir, {{"x", "s1.safetensors"}, {"y", "s2.safetensors"}, {"z", "s2.safetensors"}});
  auto ck = SafetensorsCheckpoint::open_dir(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->tensors().size(), 3u);
  ASSERT_NE(ck->find("z"), nullptr);
  float z;
  std::memcpy(&z, ck->find("z")->data, 4);
  EXPECT_EQ(z, 4.0f);
}

TEST(SafetensorsCheckpoint, RejectsInconsistentShards) {
  struct Case {
    json weight_map;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {{{"x", "s1.safetensors"}, {"w", "s2.safetensors"}}, "'w' is listed in s2.safetensors but no shard holds it"},
      {{{"x", "s2.safetensors"}, {"y", "s1.safetensors"}}, "but is found in"},
      {{{"x", "../s1.safetensors"}}, "is not a file in the folder"},
      {{{"x", "missing.safetensors"}}, "cannot open"},
      {json::object(), "weight_map is empty"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    write_sharded(dir, c.weight_map);
    auto ck = SafetensorsCheckpoint::open_dir(dir.path());
    ASSERT_FALSE(ck.ok()) << c.expect;
    EXPECT_NE(ck.error().message.find(c.expect), std::string::npos) << ck.error().message;
  }
  TempDir dup;
  write_file(dup.file("s1.safetensors"), st_file({{"x", {1}, {1}}}));
  write_file(dup.file("s2.safetensors"), st_file({{"x", {1}, {2}}}));
  write_file(dup.file("model.safetensors.index.json"),
             json{{"weight_map", {{"x", "s1.safetensors"}, {"y", "s2.safetensors"}}}}.dump());
  auto ck = SafetensorsCheckpoint::open_dir(dup.path());
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.error().message.find("more than one shard"), std::string::npos) << ck.error().message;

  TempDir empty;
  auto none = SafetensorsCheckpoint::open_dir(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no model.safetensors"), std::string::npos);
}

// ---- config.json

json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 16}, {"intermediate_size", 24},
          {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
          {"vocab_size", 32000}, {"rms_norm_eps", 1e-5}, {"tie_word_embeddings", true}};
}

TEST(HfConfig, ReadsDefaultsAndArchitectures) {
  auto c = parse_hf_config(llama_config().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->model.arch, Arch::kLlama);
  EXPECT_EQ(c->model.head_dim, 8);
  EXPECT_EQ(c->model.rope_base, 10000.0);
  EXPECT_TRUE(c->permute_qk());

  json m = llama_config();
  m["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(parse_hf_config(m.dump(), "c")->model.sliding_window, 4096);  // MistralConfig's default
  m["sliding_window"] = nullptr;
  EXPECT_EQ(parse_hf_config(m.dump(), "c")->model.sliding_window, 0);
  m["sliding_window"] = 100;
  EXPECT_EQ(parse_hf_config(m.dump(), "c")->model.sliding_window, 100);

  json q = llama_config();
  q["architectures"] = {"Qwen2ForCausalLM"};
  q["use_sliding_window"] = false;
  q["sliding_window"] = 64;
  auto qc = parse_hf_config(q.dump(), "c");
  ASSERT_TRUE(qc.ok()) << qc.error().message;
  EXPECT_EQ(qc->model.arch, Arch::kQwen2);
  EXPECT_TRUE(qc->model.qkv_bias);
  EXPECT_FALSE(qc->permute_qk());
  EXPECT_EQ(qc->model.sliding_window, 0);
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 0;
  EXPECT_EQ(parse_hf_config(q.dump(), "c")->model.sliding_window, 64);
  q["num_hidden_layers"] = 4;
  q["max_window_layers"] = 2;
  EXPECT_FALSE(parse_hf_config(q.dump(), "c").ok());

  json e = llama_config();
  e["eos_token_id"] = {128001, 128008};
  EXPECT_EQ(parse_hf_config(e.dump(), "c")->eos_token_id, 128001);
}

TEST(HfConfig, RejectsWhatItCannotRun) {
  const std::vector<std::pair<json, const char*>> cases = {
      {{{"architectures", {"GPT2LMHeadModel"}}}, "GPT2LMHeadModel is not supported"},
      {json::object(), "\"architectures\""},
      {[] { json j = llama_config(); j.erase("hidden_size"); return j; }(), "missing \"hidden_size\""},
      {[] { json j = llama_config(); j["num_key_value_heads"] = 3; return j; }(), "not a multiple"},
      {[] { json j = llama_config(); j["hidden_size"] = "16"; return j; }(), "must be an integer"},
      {[] { json j = llama_config(); j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4}}; return j; }(),
       "'dynamic' is not supported"},
      {[] { json j = llama_config(); j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}}; return j; }(),
       "needs \"original_max_position_embeddings\""},
      {[] {
         json j = llama_config();
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 64},
                              {"mscale", 0.7}, {"mscale_all_dim", 0.5}};
         return j;
       }(),
       "mscale_all_dim"},
      {[] {
         json j = llama_config();
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 64},
                              {"beta_fast", 1}, {"beta_slow", 32}};
         return j;
       }(),
       "beta_fast > beta_slow"},
      {[] { json j = llama_config(); j["rope_scaling"] = {{"type", "linear"}}; return j; }(), "needs \"factor\""},
      {[] { json j = llama_config(); j["hidden_act"] = "gelu"; return j; }(), "hidden_act"},
      {[] { json j = llama_config(); j["head_dim"] = 7; return j; }(), "must be even"},
  };
  for (const auto& [j, expect] : cases) {
    auto c = parse_hf_config(j.dump(), "cfg.json");
    ASSERT_FALSE(c.ok()) << expect;
    EXPECT_NE(c.error().message.find(expect), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("cfg.json"), std::string::npos);
  }
  EXPECT_FALSE(parse_hf_config("{not json", "c").ok());
}

TEST(HfConfig, Llama3RopeDivisors) {
  // Llama 3.1's published parameters: theta 5e5, head_dim 128, factor 8,
  // low 1, high 4, original context 8192.
  json j = llama_config();
  j["hidden_size"] = 256;
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto c = parse_hf_config(j.dump(), "c");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const std::vector<float> d = llama3_rope_divisors(*c);
  ASSERT_EQ(d.size(), 64u);
  for (size_t i = 0; i < d.size(); ++i) {
    const double freq = std::pow(500000.0, -2.0 * static_cast<double>(i) / 128.0);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < 8192.0 / 4) EXPECT_EQ(d[i], 1.0f) << i;        // high frequencies kept
    else if (wavelen > 8192.0) EXPECT_EQ(d[i], 8.0f) << i;       // low frequencies divided by 8
    else EXPECT_TRUE(d[i] > 1.0f && d[i] < 8.0f) << i << " " << d[i];
  }
  // One blended value by hand: i = 30, wavelen = 2pi * 5e5^(60/128) ~ 3.0e3.
  const double wl = 2 * M_PI * std::pow(500000.0, 60.0 / 128.0);
  const double smooth = (8192.0 / wl - 1.0) / 3.0;
  EXPECT_NEAR(d[30], 1.0 / ((1 - smooth) / 8.0 + smooth), 1e-5);
  EXPECT_GT(d[30], 1.5f);
}

// ---- folders

// A one-layer checkpoint whose Q rows hold their own HF row index.
struct Folder {
  TempDir dir;
  json config = llama_config();
  std::vector<StTensor> tensors;

  Folder() {
    std::filesystem::create_symlink(testing::shared_path("tokenizers/llama2/tokenizer.model"),
                                    dir.file("tokenizer.model"));
    auto filled = [](int64_t rows, int64_t cols, float first) {
      std::vector<float> v(static_cast<size_t>(rows * cols));
      for (size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<float>(i / static_cast<size_t>(cols));
      return v;
    };
    const std::string p = "model.layers.0.";
    tensors = {{"model.embed_tokens.weight", {32000, 16}, filled(32000, 16, 0)},
               {p + "input_layernorm.weight", {16}, filled(16, 1, 1)},
               {p + "self_attn.q_proj.weight", {16, 16}, filled(16, 16, 0)},
               {p + "self_attn.k_proj.weight", {8, 16}, filled(8, 16, 100)},
               {p + "self_attn.v_proj.weight", {8, 16}, filled(8, 16, 200)},
               {p + "self_attn.o_proj.weight", {16, 16}, filled(16, 16, 0)},
               {p + "post_attention_layernorm.weight", {16}, filled(16, 1, 1)},
               {p + "mlp.gate_proj.weight", {24, 16}, filled(24, 16, 0)},
               {p + "mlp.up_proj.weight", {24, 16}, filled(24, 16, 0)},
               {p + "mlp.down_proj.weight", {16, 24}, filled(16, 24, 0)},
               {"model.norm.weight", {16}, filled(16, 1, 1)}};
  }
  void write() {
    write_file(dir.file("config.json"), config.dump());
    write_file(dir.file("model.safetensors"), st_file(tensors));
  }
  // The folder as Model::load sees it.
  Result<GgufFile> as_gguf() {
    write();
    DUET_ASSIGN(std::shared_ptr<HfCheckpoint> ck, HfCheckpoint::open(dir.path()));
    return hf_as_gguf(ck);
  }
  std::string open_error() {
    write();
    auto ck = HfCheckpoint::open(dir.path());
    return ck.ok() ? std::string("(opened)") : ck.error().message;
  }
};

float first_of_row(const TensorView& t, int64_t row) {
  float v;
  std::memcpy(&v, t.row(row), 4);
  return v;
}

TEST(HfImport, PermutesQkRowsForLlama) {
  Folder f;
  auto file = f.as_gguf();
  ASSERT_TRUE(file.ok()) << file.error().message;
  const TensorView* q = file->tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne[0], 16);
  EXPECT_EQ(q->ne[1], 16);
  // head_dim 8: GGUF rows (0..7) of head 0 are HF rows 0,4,1,5,2,6,3,7.
  const int64_t expected[] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};
  for (int64_t r = 0; r < 16; ++r) EXPECT_EQ(first_of_row(*q, r), expected[r]) << r;
  const TensorView* k = file->tensor("blk.0.attn_k.weight");
  for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(first_of_row(*k, r), 100 + expected[r]) << r;
  const TensorView* v = file->tensor("blk.0.attn_v.weight");
  for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(first_of_row(*v, r), 200 + r) << r;
  // Tied: no output.weight; the tokenizer came along.
  EXPECT_EQ(file->tensor("output.weight"), nullptr);
  EXPECT_EQ(*file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_strings("tokenizer.ggml.tokens")->size(), 32000u);
}

TEST(HfImport, KeepsQwen2RowsAndBiases) {
  Folder f;
  f.config["architectures"] = {"Qwen2ForCausalLM"};
  const std::string p = "model.layers.0.";
  f.tensors.push_back({p + "self_attn.q_proj.bias", {16}, std::vector<float>(16, 0.5f)});
  f.tensors.push_back({p + "self_attn.k_proj.bias", {8}, std::vector<float>(8, 0.5f)});
  f.tensors.push_back({p + "self_attn.v_proj.bias", {8}, std::vector<float>(8, 0.5f)});
  auto file = f.as_gguf();
  ASSERT_TRUE(file.ok()) << file.error().message;
  const TensorView* q = file->tensor("blk.0.attn_q.weight");
  for (int64_t r = 0; r < 16; ++r) EXPECT_EQ(first_of_row(*q, r), r);
  EXPECT_NE(file->tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(*file->get_string("general.architecture"), "qwen2");
}

TEST(HfImport, RejectsMissingAndMisshapenTensors) {
  {
    Folder f;
    f.tensors.erase(f.tensors.begin() + 4);  // v_proj
    EXPECT_NE(f.open_error().find("missing tensor model.layers.0.self_attn.v_proj.weight"),
              std::string::npos);
  }
  {
    Folder f;
    f.config["intermediate_size"] = 32;  // the tensors say 24
    const std::string e = f.open_error();
    EXPECT_NE(e.find("mlp.gate_proj.weight has shape [24, 16] but config.json implies [32, 16]"),
              std::string::npos) << e;
  }
  {
    Folder f;
    f.config["tie_word_embeddings"] = false;
    EXPECT_NE(f.open_error().find("missing tensor lm_head.weight"), std::string::npos);
  }
  {
    Folder f;
    f.tensors.push_back({"model.layers.1.mlp.up_proj.weight", {1}, {0}});
    EXPECT_NE(f.open_error().find("unexpected tensor model.layers.1.mlp.up_proj.weight"),
              std::string::npos);
  }
  {
    Folder f;
    f.config["vocab_size"] = 1000;  // fewer rows than the tokenizer has tokens
    f.tensors[0] = {"model.embed_tokens.weight", {1000, 16}, std::vector<float>(16000, 0)};
    EXPECT_NE(f.open_error().find("32000 tokens but config.json's vocab_size is 1000"),
              std::string::npos);
  }
  {
    Folder f;
    f.write();
    write_file(f.dir.file("config.json"), "{\"architectures\": [");
    auto ck = HfCheckpoint::open(f.dir.path());
    ASSERT_FALSE(ck.ok());
    EXPECT_NE(ck.error().message.find("config.json: not valid JSON"), std::string::npos);
  }
  {
    Folder f;
    f.write();
    std::filesystem::remove(f.dir.file("tokenizer.model"));
    auto ck = HfCheckpoint::open(f.dir.path());
    ASSERT_FALSE(ck.ok());
    EXPECT_NE(ck.error().message.find("no tokenizer.model or tokenizer.json"), std::string::npos);
  }
}

TEST(HfImport, RejectsBadTokenizerJson) {
  const std::vector<std::pair<std::string, const char*>> cases = {
      {"{\"model\": ", "not valid JSON"},
      {R"({"model": {"type": "Unigram", "vocab": []}})", "is not supported (BPE only)"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}})",
       "'Whitespace' is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "pattern": {"Regex": "\\s+"}}, {"type": "ByteLevel", "use_regex": false}]}})",
       "Split regex"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "gives id 0 to two tokens"},
      {R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "is not a token id"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [5]}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "merges[0]"},
      // Found by fuzz_hf_tokenizer (fuzz/regressions/): a field of the wrong
      // type made nlohmann's value() throw, and one id near the limit made a
      // tiny file allocate gigabytes of placeholders.
      {R"({"model": {"type": 5, "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "model type 5 is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": ["ByteLevel"]}})",
       "pre_tokenizer step '' is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"},
           "added_tokens": [{"id": 1, "content": "<s>", "special": "yes"}]})",
       "\"special\" must be true or false"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 16777215}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "ids would have no token"},
  };
  for (const auto& [text, expect] : cases) {
    Folder f;
    f.write();
    std::filesystem::remove(f.dir.file("tokenizer.model"));
    write_file(f.dir.file("tokenizer.json"), text);
    auto ck = HfCheckpoint::open(f.dir.path());
    ASSERT_FALSE(ck.ok()) << expect;
    EXPECT_NE(ck.error().message.find(expect), std::string::npos) << ck.error().message;
    EXPECT_NE(ck.error().message.find("tokenizer.json"), std::string::npos) << ck.error().message;
  }
}

}  // namespace
}  // namespace duet
