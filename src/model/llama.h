// The llama architecture (Llama 2/3, TinyLlama, and relatives by config):
// pre-norm decoder blocks of RMSNorm → GQA attention with RoPE → residual →
// RMSNorm → SwiGLU FFN → residual.
#pragma once

#include <memory>

#include "model/model.h"

namespace duet {

Result<std::unique_ptr<Model>> load_llama(GgufFile file, ModelConfig config,
                                          std::unique_ptr<Tokenizer> tokenizer);

}  // namespace duet
