// Hyper-parameters of a decoder-only transformer: the one struct that every
// source fills (GGUF metadata, a Hugging Face config.json, a llama2.c header,
// a synthetic shape) and the one writer of them as GGUF metadata. An
// architecture is data: the llama family differs only in these values.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace duet {

class GgufFile;
class GgufWriter;

// How RoPE pairs the dims of a head: llama's GGUF layout rotates adjacent
// pairs (2i, 2i+1); NeoX/Qwen2 rotate (i, i + rope_dim/2).
enum class RopeLayout { kNormal, kNeox };

struct ModelConfig {
  std::string arch = "llama";
  std::string name = "";  // general.name
  int32_t n_vocab = 0;
  int32_t dim = 0;         // embedding length
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;
  int32_t ctx_len = 0;     // trained context length
  int32_t rope_dim = 0;    // leading dims of each head that RoPE rotates
  float rope_base = 10000.0f;
  RopeLayout rope_layout = RopeLayout::kNormal;
  float rope_linear_factor = 1.0f;  // positions are divided by this (linear scaling)
  float rms_eps = 1e-5f;
  int32_t sliding_window = 0;       // > 0: each token attends to the last this many
  bool tied_output = false;         // the head reads token_embd (no output.weight)
  bool qkv_bias = false;            // set by the weight binder (Qwen2)

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads and validates the config of a supported architecture (llama,
// mistral, qwen2: one forward pass, different configuration).
Result<ModelConfig> read_model_config(const GgufFile& file);

// Writes general.architecture, general.name and the architecture's keys as
// llama.cpp's converters do; key_length/value_length only where heads do
// not divide dim evenly, the optional features only when in use.
void write_model_config(GgufWriter& w, const ModelConfig& c);

}  // namespace duet
