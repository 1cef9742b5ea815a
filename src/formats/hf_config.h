// A Hugging Face model folder's config.json: the architecture (a
// transformers class that an architecture's record lists, formats/arch/)
// and its hyper-parameters, with the defaults of the transformers
// configuration classes where a key is absent or null: the keys every
// class has here, each family's own in its record's reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/hf_quant_config.h"
#include "formats/model_config.h"

namespace duet {

struct HfRopeScaling {
  std::string type;              // "" (none), "linear", "llama3", "longrope" or "yarn"
  double factor = 1.0;
  // llama3 only.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int32_t original_max_position_embeddings = 8192;
  // yarn only (with factor and original_max_position_embeddings).
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 1.0, mscale_all_dim = 0.0;  // DeepSeek-V2's attention multipliers
  // longrope only: divisors of the base frequencies [rope_dim/2].
  std::vector<float> short_factor, long_factor;
};

struct HfConfig {
  std::string hf_architecture;  // "LlamaForCausalLM", ...
  // head_dim hidden_size / heads unless given; sliding_window 0 for full
  // causal attention; a linear rope_scaling's factor as rope_linear_factor;
  // a mixture's dense layers in model.dense_layers.
  ModelConfig model;
  HfRopeScaling rope_scaling;
  int64_t bos_token_id = -1;             // -1: not given
  int64_t eos_token_id = -1;             // the first when config.json lists several
  HfQuantization quant;                  // method kNone unless quantization_config is given
  // HF's rotate-half RoPE pairs (i, i + d/2) become GGUF's (2i, 2i+1) where
  // the architecture's GGUF rotates adjacent pairs (Llama): Q/K rows are
  // permuted on import (its record's traits say).
  bool permute_qk() const;
};

// `source` names the file in errors.
Result<HfConfig> parse_hf_config(const std::string& json_text, const std::string& source);
Result<HfConfig> read_hf_config(const std::string& path);

// Llama 3.1 RoPE scaling as per-dimension divisors of the base frequencies
// theta^(-2i/head_dim), i < head_dim/2 (GGUF's rope_freqs.weight): 1 for
// wavelengths shorter than original_ctx/high_freq_factor, `factor` for those
// longer than original_ctx/low_freq_factor, and a smooth blend in between.
std::vector<float> llama3_rope_divisors(const HfConfig& c);

}  // namespace duet
