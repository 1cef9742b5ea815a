// Hyper-parameters of a decoder-only transformer, read from GGUF metadata.
// An architecture is data: the llama family differs only in these values.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"

namespace duet {

class GgufFile;

struct ModelConfig {
  std::string arch;
  std::string name;
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
  float rms_eps = 1e-5f;
  bool tied_output = false;

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads and validates the config; tied_output is set by the weight binder.
Result<ModelConfig> read_model_config(const GgufFile& file);

}  // namespace duet
