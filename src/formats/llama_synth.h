// Random-weight llama models of real shapes (`duet synth`): a runnable GGUF
// of any size without its trained weights, for shape coverage in tests and
// for benchmarks of models that cannot be downloaded here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"

namespace duet {

struct LlamaShape {
  int64_t dim = 0;
  int64_t ffn = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;  // 0 means dim / heads
  int64_t vocab_size = 0;
  int64_t ctx = 0;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  bool tied = false;  // output head shares token_embd (no output.weight)
  int64_t sliding_window = 0;  // Mistral-style attention window; 0: none

  int64_t head_dim_or_default() const { return head_dim ? head_dim : (heads ? dim / heads : 0); }
};

// Shapes of published models: "tinyllama-1.1b", "stories110m", "stories15m".
Result<LlamaShape> llama_preset(std::string_view name);

// An error naming the first field that makes the shape unusable.
Status validate_shape(const LlamaShape& s);

struct SynthOptions {
  std::string name;           // general.name
  LlamaShape shape;
  DType dtype = DType::F32;   // matrices and embeddings: F32, F16 or BF16; norms stay F32
  uint64_t seed = 0;
  std::string vocab_from;     // GGUF whose tokenizer.* keys are copied; empty: synthetic vocab
};

// Draws the weights and writes the GGUF. With vocab_from set, the vocabulary
// size comes from that file (a different nonzero shape.vocab_size is an error).
Status synth_llama(const SynthOptions& opt, const std::string& out_path);

}  // namespace duet
