#include "model/architectures.h"

namespace duet {

LayerBinder layer_binder(const std::string& arch) {
  if (arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen2moe") return bind_llama_layer;
  if (arch == "qwen3" || arch == "qwen3moe") return bind_qwen3_layer;
  if (arch == "olmoe") return bind_olmoe_layer;
  if (arch == "olmo2") return bind_olmo2_layer;
  if (arch == "gemma2" || arch == "gemma3") return bind_gemma_layer;
  if (arch == "phi3") return bind_phi3_layer;
  if (arch == "deepseek2") return bind_deepseek2_layer;
  return nullptr;
}

}  // namespace duet
