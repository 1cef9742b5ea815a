// Which type each tensor of a model gets when `duet quantize` rewrites it.
// The rules follow what other GGUF tools do, so the files look like theirs:
//  - tensors with one dimension (norms, biases, RoPE factors) and the
//    routers of a mixture of experts (ffn_gate_inp) stay as they are;
//  - token_embd.weight and output.weight keep Q8_0 when the target has fewer
//    bits (the head and the embedding are where low precision costs most);
//  - a matrix whose rows do not divide into the target's blocks (256 for the
//    K-quants, IQ4_XS and TQ*, 32 for the others) falls back to the nearest
//    type that fits, at least as precise: Q2_K/Q3_K/IQ4_XS/TQ1_0/TQ2_0 ->
//    IQ4_NL, Q4_K -> Q4_1, Q5_K/Q6_K -> Q8_0 when the row divides into 32,
//    else F16 (F32 when the target is F32);
//  - names matched by a --keep pattern are copied unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace duet {

// Per weight tensor (by name), one importance per input channel (ne[0]
// values >= 0, e.g. the mean squared activation that multiplies that column).
using ChannelImportance = std::map<std::string, std::vector<float>>;

struct QuantizeOptions {
  DType target = DType::Q8_0;
  // Tensor names to copy unchanged: each pattern is a glob matched against the
  // whole name ("blk.*.ffn_down.weight") or, failing that, an ECMAScript
  // regular expression searched in it ("attn_(q|k)").
  std::vector<std::string> keep;
  // With importance, quantizers minimize the importance-weighted squared
  // error instead of their default one (not owned; may be null).
  const ChannelImportance* importance = nullptr;
};

// The types `duet quantize` can target.
bool is_quantize_target(DType t);

// True if `name` matches the pattern as described for QuantizeOptions::keep.
bool name_matches(const std::string& pattern, const std::string& name);

struct TensorChoice {
  DType type;
  std::string_view reason;  // "target", "kept", "1-D", "embedding/head", "row fallback"
};
TensorChoice choose_tensor_type(const TensorView& t, const QuantizeOptions& o);

}  // namespace duet
