#include "quantize/policy.h"

#include <fnmatch.h>

#include <regex>

#include "core/quant_blocks.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

namespace n = gguf_names;

bool is_quantized_block_type(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_1: case DType::Q4_K: case DType::Q5_K:
    case DType::Q6_K: case DType::Q5_0: case DType::Q5_1: case DType::Q2_K: case DType::Q3_K:
    case DType::IQ4_NL: case DType::IQ4_XS: case DType::TQ1_0: case DType::TQ2_0:
      return true;
    default:
      return false;
  }
}

// Targets below 8 bits per weight, for which the embedding and head keep Q8_0.
bool is_low_bit(DType t) { return is_quantized_block_type(t) && t != DType::Q8_0; }

// The nearest type at least as precise as `want` whose blocks fit rows of k:
// 4 bits for the types below 4.5 bits per weight (IQ4_NL, as llama-quantize
// picks for them), Q4_1 for Q4_K, else Q8_0; F16 where 32 does not divide k.
DType row_fallback(DType want, int64_t k) {
  if (k % kQK32 != 0) return DType::F16;
  switch (want) {
    case DType::Q2_K: case DType::Q3_K: case DType::IQ4_XS: case DType::TQ1_0: case DType::TQ2_0:
      return DType::IQ4_NL;
    case DType::Q4_K:
      return DType::Q4_1;
    default:
      return DType::Q8_0;
  }
}

}  // namespace

bool is_quantize_target(DType t) {
  return is_quantized_block_type(t) || t == DType::F16 || t == DType::BF16 || t == DType::F32;
}

bool name_matches(const std::string& pattern, const std::string& name) {
  if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  try {
    return std::regex_search(name, std::regex(pattern));
  } catch (const std::regex_error&) {
    return false;  // a glob that is not a valid regular expression
  }
}

TensorChoice choose_tensor_type(const TensorView& t, const QuantizeOptions& o) {
  if (t.n_dims < 2) return {t.dtype, "1-D"};
  for (const std::string& p : o.keep)
    if (name_matches(p, t.name)) return {t.dtype, "kept"};
  // A router is small, and a quantization error there changes which
  // experts run, not just how precisely: llama-quantize leaves it alone too.
  if (t.name.find("." + n::kFfnRouter + ".") != std::string::npos) return {t.dtype, "router"};
  TensorChoice c{o.target, "target"};
  if ((t.name == n::kTokenEmbd || t.name == n::kOutput) && is_low_bit(o.target))
    c = {DType::Q8_0, "embedding/head"};
  if (t.ne[0] % traits(c.type).block_elems != 0) c = {row_fallback(c.type, t.ne[0]), "row fallback"};
  return c;
}

}  // namespace duet
