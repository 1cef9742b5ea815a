// Random-weight models of real shapes (`duet synth`): a runnable GGUF
// of any size without its trained weights, for shape coverage in tests and
// for benchmarks of models that cannot be downloaded here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/model_config.h"

namespace duet {

// Shapes of published models: "tinyllama-1.1b", "stories110m", "stories15m",
// "qwen3-0.6b", "gemma3-1b", "gemma2-2b", "phi4-mini", and the mixtures of
// experts "mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b", and "olmo2-1b" (their architecture included).
Result<ModelConfig> model_preset(std::string_view name);

// An error naming the first field that makes the shape unusable. A head_dim
// of 0 stands for dim / n_heads.
Status validate_shape(const ModelConfig& s);

struct SynthOptions {
  ModelConfig shape;          // its name is general.name; head_dim 0: dim / n_heads
  DType dtype = DType::F32;   // matrices and embeddings: F32, F16 or BF16; norms stay F32
  uint64_t seed = 0;
  std::string vocab_from;     // GGUF whose tokenizer.* keys are copied; empty: synthetic vocab
};

// Draws the weights of shape.arch's tensors (llama, qwen3, qwen3moe, gemma2,
// gemma3, phi3; experts when shape.n_experts > 0) and writes the GGUF. With vocab_from set, the vocabulary
// size comes from that file (a different nonzero shape.n_vocab is an error).
Status synth_model(const SynthOptions& opt, const std::string& out_path);

}  // namespace duet
