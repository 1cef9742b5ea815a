// Pre-quantized HF checkpoints: quantization_config refusals, shapes that
// contradict the config, and the repacked bytes of a small GPTQ folder.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "formats/fp8.h"
#include "formats/hf_config.h"
#include "formats/hf_import.h"
#include "test_util.h"

namespace duet {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::write_file;

// A tensor as safetensors stores it: its dtype name, shape and raw bytes.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string raw_st_file(const std::vector<RawTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text += std::string((8 - text.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<size_t>(i)] = static_cast<char>(text.size() >> (8 * i));
  return len + text + data;
}

constexpr int64_t kDim = 32, kFfn = 64, kGroup = 32;

// One Llama layer whose seven linears are AutoGPTQ tensors: every code 9,
// every zero 8 (stored as 7), scale 0.5, so each weight is exactly 0.5.
struct GptqFolder {
  TempDir dir;
  json config = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", kDim}, {"intermediate_size", kFfn},
                 {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 2},
                 {"vocab_size", 32000}, {"tie_word_embeddings", true},
                 {"quantization_config", {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", kGroup},
                                          {"desc_act", false}, {"sym", true}}}};
  std::vector<RawTensor> tensors;

  GptqFolder() {
    std::filesystem::create_symlink(testing::shared_path("tokenizers/llama2/tokenizer.model"),
                                    dir.file("tokenizer.model"));
    auto f32 = [](int64_t n, float v) { return raw(std::vector<float>(static_cast<size_t>(n), v)); };
    const std::string p = "model.layers.0.";
    tensors = {{"model.embed_tokens.weight", "F32", {32000, kDim}, f32(32000 * kDim, 0.1f)},
               {p + "input_layernorm.weight", "F32", {kDim}, f32(kDim, 1)},
               {p + "post_attention_layernorm.weight", "F32", {kDim}, f32(kDim, 1)},
               {"model.norm.weight", "F32", {kDim}, f32(kDim, 1)}};
    const std::pair<const char*, std::pair<int64_t, int64_t>> linears[] = {
        {"self_attn.q_proj", {kDim, kDim}}, {"self_attn.k_proj", {kDim, kDim}}, {"self_attn.v_proj", {kDim, kDim}},
        {"self_attn.o_proj", {kDim, kDim}}, {"mlp.gate_proj", {kFfn, kDim}},   {"mlp.up_proj", {kFfn, kDim}},
        {"mlp.down_proj", {kDim, kFfn}}};
    for (const auto& [name, shape] : linears) add_gptq(p + name, shape.first, shape.second);
  }
  void add_gptq(const std::string& prefix, int64_t out, int64_t in) {
    const int64_t groups = in / kGroup;
    std::vector<int32_t> g_idx(static_cast<size_t>(in));
    for (int64_t i = 0; i < in; ++i) g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(i / kGroup);
    tensors.push_back({prefix + ".qweight", "I32", {in / 8, out},
                       raw(std::vector<int32_t>(static_cast<size_t>(in / 8 * out), int32_t(0x99999999u)))});
    tensors.push_back({prefix + ".qzeros", "I32", {groups, out / 8},
                       raw(std::vector<int32_t>(static_cast<size_t>(groups * out / 8), 0x77777777))});
    tensors.push_back({prefix + ".scales", "F16", {groups, out},
                       raw(std::vector<uint16_t>(static_cast<size_t>(groups * out), f32_to_f16(0.5f)))});
    tensors.push_back({prefix + ".g_idx", "I32", {in}, raw(g_idx)});
  }
  RawTensor* find(const std::string& name) {
    for (RawTensor& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  std::string open_error() {
    write_file(dir.file("config.json"), config.dump());
    write_file(dir.file("model.safetensors"), raw_st_file(tensors));
    auto ck = HfCheckpoint::open(dir.path());
    return ck.ok() ? std::string("(opened)") : ck.error().message;
  }
};

std::string config_error(const json& quant) {
  json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 32}, {"intermediate_size", 64},
            {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"vocab_size", 100},
            {"quantization_config", quant}};
  auto r = parse_hf_config(c.dump(), "config.json");
  return r.ok() ? std::string("(parsed)") : r.error().message;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(HfQuantConfig, RefusesWhatItCannotLoad) {
  const json gptq = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}};
  EXPECT_EQ(config_error(gptq), "(parsed)");
  json g8 = gptq;
  g8["bits"] = 8;
  EXPECT_TRUE(has(config_error(g8), "gptq with bits 8 is not supported (4 only)")) << config_error(g8);
  json g3 = gptq;
  g3["bits"] = 3;
  EXPECT_TRUE(has(config_error(g3), "bits 3 is not supported"));
  json v3 = gptq;
  v3["checkpoint_format"] = "marlin";
  EXPECT_TRUE(has(config_error(v3), "checkpoint_format 'marlin' is not supported"));
  json odd = gptq;
  odd["group_size"] = 100;
  EXPECT_TRUE(has(config_error(odd), "group_size 100 is not supported"));
  EXPECT_TRUE(has(config_error({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}}),
                  "AWQ version 'gemv' is not supported (GEMM only)"));
  EXPECT_EQ(config_error({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "GEMM"}}), "(parsed)");
  EXPECT_TRUE(has(config_error({{"quant_method", "bitsandbytes"}}), "quant_method 'bitsandbytes' is not supported"));
  EXPECT_TRUE(has(config_error({{"quant_method", "fp8"}, {"fmt", "e5m2"}}), "FP8 format 'e5m2' is not supported"));
  EXPECT_TRUE(has(config_error({{"quant_method", "fp8"}, {"weight_block_size", {128}}}), "FP8 block size"));
  EXPECT_TRUE(has(config_error({{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"}}),
                  "compressed-tensors format 'pack-quantized' is not supported"));
  EXPECT_TRUE(has(config_error({{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
                                {"config_groups", {{"g", {{"weights", {{"num_bits", 4}, {"type", "int"}}}}}}}}),
                  "config group 'g' does not quantize weights to 8-bit floats"));
  EXPECT_TRUE(has(config_error("gptq"), "quantization_config must be an object"));
  // Read whole, not narrowed to int32 first (2^32 + 4 would pass as 4).
  json wide = gptq;
  wide["bits"] = 4294967300LL;
  EXPECT_TRUE(has(config_error(wide), "bits 4294967300 is not supported")) << config_error(wide);
  // Fields of the wrong type are errors, not nlohmann exceptions (fuzz_hf_config).
  const auto ct = [](const json& weights) {
    return json{{"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
                {"config_groups", {{"g", {{"weights", weights}}}}}};
  };
  EXPECT_TRUE(has(config_error(ct({{"num_bits", "8"}, {"type", "float"}})), "does not quantize weights to 8-bit"));
  EXPECT_TRUE(has(config_error(ct({{"num_bits", 8}, {"type", 8}})), "\"type\" must be a string"));
  EXPECT_TRUE(has(config_error(ct({{"num_bits", 8}, {"type", "float"}, {"strategy", {1}}})),
                  "\"strategy\" must be a string"));
  EXPECT_EQ(config_error(ct({{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}})), "(parsed)");
}

TEST(HfQuantized, SymmetricGptqRepacksToQ4_0Exactly) {
  GptqFolder f;
  ASSERT_EQ(f.open_error(), "(opened)");
  auto ck = HfCheckpoint::open(f.dir.path());
  ASSERT_TRUE(ck.ok());
  auto file = hf_as_gguf(*ck);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const TensorView* up = file->tensor("blk.0.ffn_up.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->dtype, DType::Q4_0);
  EXPECT_EQ(up->ne[0], kDim);
  EXPECT_EQ(up->ne[1], kFfn);
  const auto* blocks = static_cast<const BlockQ4_0*>(up->data);
  for (int64_t b = 0; b < kFfn * kDim / kQK32; ++b) {
    EXPECT_EQ(blocks[b].d, f32_to_f16(0.5f)) << b;  // the checkpoint's f16 scale, untouched
    for (uint8_t q : blocks[b].qs) EXPECT_EQ(q, 0x99) << b;  // (9 - 8) * 0.5
  }
  // A float dtype dequantizes: every weight (9 - (7 + 1)) * 0.5.
  std::vector<uint8_t> buffer;
  size_t up_index = 0;
  for (size_t i = 0; i < (*ck)->n_tensors(); ++i) {
    std::vector<uint8_t> scratch;
    auto t = (*ck)->tensor(i, DType::F32, scratch);
    ASSERT_TRUE(t.ok());
    if (t->name == "blk.0.ffn_up.weight") up_index = i;
  }
  auto f32 = (*ck)->tensor(up_index, DType::F32, buffer);
  ASSERT_TRUE(f32.ok());
  const auto* w = static_cast<const float*>(f32->data);
  for (int64_t i = 0; i < kFfn * kDim; ++i) ASSERT_EQ(w[i], 0.5f) << i;
}

TEST(HfQuantized, AsymmetricZerosGoToQ4_1) {
  GptqFolder f;
  RawTensor* z = f.find("model.layers.0.mlp.up_proj.qzeros");
  std::vector<int32_t> zeros(z->bytes.size() / 4, 0x77777777);
  zeros[0] = 0x77777775;  // output 0 of group 0: zero 6
  z->bytes = raw(zeros);
  ASSERT_EQ(f.open_error(), "(opened)");
  auto ck = HfCheckpoint::open(f.dir.path());
  auto file = hf_as_gguf(*ck);
  ASSERT_TRUE(file.ok());
  const TensorView* up = file->tensor("blk.0.ffn_up.weight");
  EXPECT_EQ(up->dtype, DType::Q4_1);
  const auto* b = static_cast<const BlockQ4_1*>(up->data);
  EXPECT_EQ(f16_to_f32(b[0].m), -3.0f);  // -0.5 * 6
  EXPECT_EQ(f16_to_f32(b[1].m), -4.0f);  // row 1: -0.5 * 8
  EXPECT_EQ(file->tensor("blk.0.ffn_down.weight")->dtype, DType::Q4_0);  // decided per tensor
}

TEST(HfQuantized, RejectsShapesThatContradictTheConfig) {
  {
    GptqFolder f;
    RawTensor* q = f.find("model.layers.0.mlp.down_proj.qweight");
    q->shape = {kFfn / 8, kDim / 2};
    q->bytes.resize(q->bytes.size() / 2);
    const std::string e = f.open_error();
    EXPECT_TRUE(has(e, "tensor model.layers.0.mlp.down_proj.qweight has shape [8, 16] but config.json implies [8, 32]"))
        << e;
  }
  {
    GptqFolder f;
    f.config["quantization_config"]["group_size"] = 16;  // the scales hold 1 group per 32 inputs
    const std::string e = f.open_error();
    EXPECT_TRUE(has(e, "tensor model.layers.0.self_attn.q_proj.qzeros has shape [1, 4] but config.json implies [2, 4]"))
        << e;
  }
  {
    GptqFolder f;
    RawTensor* s = f.find("model.layers.0.self_attn.k_proj.scales");
    s->dtype = "I32";
    s->bytes.resize(s->bytes.size() * 2);
    EXPECT_TRUE(has(f.open_error(), "tensor model.layers.0.self_attn.k_proj.scales is I32")) << f.open_error();
  }
  {
    GptqFolder f;
    RawTensor* g = f.find("model.layers.0.self_attn.v_proj.g_idx");
    std::vector<int32_t> idx(static_cast<size_t>(kDim), 0);
    idx[5] = 3;  // only group 0 exists
    g->bytes = raw(idx);
    EXPECT_TRUE(has(f.open_error(), "tensor model.layers.0.self_attn.v_proj.g_idx[5] = 3 is not a group (0..0)"))
        << f.open_error();
  }
  {
    GptqFolder f;
    f.config.erase("quantization_config");
    EXPECT_TRUE(has(f.open_error(), "holds model.layers.0.self_attn.q_proj.qweight but config.json has no GPTQ or AWQ"))
        << f.open_error();
  }
  {
    GptqFolder f;
    f.config["quantization_config"]["bits"] = 8;
    EXPECT_TRUE(has(f.open_error(), "gptq with bits 8 is not supported (4 only)")) << f.open_error();
  }
}

TEST(HfQuantized, RejectsBadFp8Scales) {
  GptqFolder f;
  f.config["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {16, 16}}};
  const std::string p = "model.layers.0.";
  std::vector<RawTensor> kept;
  for (RawTensor& t : f.tensors)
    if (t.name.find("proj.") == std::string::npos) kept.push_back(t);
  f.tensors = kept;
  const std::pair<const char*, std::pair<int64_t, int64_t>> linears[] = {
      {"self_attn.q_proj", {kDim, kDim}}, {"self_attn.k_proj", {kDim, kDim}}, {"self_attn.v_proj", {kDim, kDim}},
      {"self_attn.o_proj", {kDim, kDim}}, {"mlp.gate_proj", {kFfn, kDim}},   {"mlp.up_proj", {kFfn, kDim}},
      {"mlp.down_proj", {kDim, kFfn}}};
  for (const auto& [name, shape] : linears) {
    const auto [out, in] = shape;
    f.tensors.push_back({p + name + ".weight", "F8_E4M3", {out, in}, std::string(static_cast<size_t>(out * in), '\x38')});
    f.tensors.push_back({p + name + ".weight_scale_inv", "F32", {out / 16, in / 16},
                         raw(std::vector<float>(static_cast<size_t>(out / 16 * in / 16), 0.25f))});
  }
  ASSERT_EQ(f.open_error(), "(opened)");
  RawTensor* s = f.find(p + "mlp.down_proj.weight_scale_inv");
  s->shape = {4, 2};  // [ceil(32/16), ceil(64/16)] transposed
  EXPECT_TRUE(has(f.open_error(), "tensor model.layers.0.mlp.down_proj.weight_scale_inv has shape [4, 2]")) << f.open_error();
  s->shape = {2, 4};
  RawTensor* w = f.find(p + "mlp.up_proj.weight");
  w->bytes[7] = '\x7f';
  EXPECT_TRUE(has(f.open_error(), "tensor model.layers.0.mlp.up_proj.weight holds NaN at element 7")) << f.open_error();
}

TEST(Fp8, DecodesE4M3) {
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xC0), -2.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_f32(0x80), 0.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
}

}  // namespace
}  // namespace duet
