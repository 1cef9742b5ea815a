// A Hugging Face model folder (config.json, model.safetensors or its shards,
// tokenizer.model or tokenizer.json) as GGUF: llama.cpp's tensor names and
// metadata (formats/llama_names.h) for each architecture, Q/K rows permuted from HF's rotate-half
// RoPE layout to the interleaved pairs of GGUF "llama" (Qwen2's GGUF keeps
// NeoX pairs, so its rows stay), norms and biases as F32 (Gemma's as 1 + w,
// as llama.cpp's converter stores them), and Llama 3.1
// rope_scaling as a rope_freqs.weight tensor. Two uses: `duet convert`
// writes it to a file; `hf_as_gguf` serves it in memory to Model::load, with
// the matrices that need no change still views of the mapped safetensors.
// Pre-quantized checkpoints (config.json's quantization_config: GPTQ, AWQ,
// FP8) have their linear layers repacked into Q4_0 / Q4_1 / Q8_0
// (formats/hf_quantized.h), or dequantized when a float dtype is asked for.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/hf_quantized.h"
#include "formats/safetensors.h"

namespace duet {

class HfCheckpoint {
 public:
  // Reads config.json, the safetensors header(s) and the tokenizer, and checks
  // every expected tensor's presence and shape against the config.
  static Result<std::shared_ptr<HfCheckpoint>> open(const std::string& dir);

  const HfConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  // Architecture, hyper-parameters and tokenizer keys, in GGUF form.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  size_t n_tensors() const { return plans_.size(); }
  // Of tensor i, one expert's matrix of a mixture of experts: the stacked
  // GGUF tensor it belongs to and its index there; ("", -1) for the rest.
  // (Served in place, each expert stays a tensor of its own,
  // blk.L.ffn_gate.E.weight; convert stacks them.)
  std::pair<std::string, int32_t> expert_of(size_t i) const { return {plans_[i].stacked, plans_[i].expert}; }

  // GGUF tensor i: 2-D weights in `dtype` (nullopt: as stored, or a
  // quantized layer's native() layout), vectors in F32. The view points into the mapped file when the bytes need no change;
  // otherwise into `buffer`, which this fills.
  Result<TensorView> tensor(size_t i, std::optional<DType> dtype,
                            std::vector<uint8_t>& buffer) const;

 private:
  struct Plan {
    std::string name;                          // GGUF name
    const SafetensorsTensor* source = nullptr;  // null: computed_ of the same name
    int32_t permute_heads = 0;                 // > 0: rows of this many heads permuted
    float add = 0.0f;                          // added to every element (Gemma's norms: 1 + w)
    std::shared_ptr<const QuantizedLinear> quant;  // set: a pre-quantized layer (source is null)
    std::string stacked;                       // an expert's: the GGUF tensor of the layer's experts
    int32_t expert = -1;
  };
  Status plan_layer(int64_t l, const std::function<Status(const std::string&, std::string, std::vector<int64_t>,
                                                          int32_t, float)>& add);
  Status plan_tensors();
  Status set_metadata();
  Status check_plain(const SafetensorsTensor& t) const;
  Result<TensorView> quantized_tensor(const Plan& p, std::optional<DType> dtype,
                                      std::vector<uint8_t>& buffer) const;

  std::string dir_;
  HfConfig config_;
  SafetensorsCheckpoint weights_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Plan> plans_;
  // F32 vectors derived from config.json: llama3's rope_freqs, LongRoPE's
  // short and long factors.
  std::vector<std::pair<std::string, std::vector<float>>> computed_;
  Status add_computed(std::string name, std::vector<float> values);
};

// The GGUF file `duet convert --from hf` writes.
// `progress` (may be empty) hears the tensors converted.
Result<GgufWriter> hf_to_gguf(const HfCheckpoint& ck, std::optional<DType> dtype, const ProgressFn& progress = {});

// The checkpoint as an in-memory GgufFile for Model::load: tensors that need
// no change are views of the mapping; the permuted Q/K matrices (llama and
// mistral) and the F32 copies of F16/BF16 norms and biases are materialized
// into buffers the returned file owns.
Result<GgufFile> hf_as_gguf(std::shared_ptr<const HfCheckpoint> ck);

}  // namespace duet
