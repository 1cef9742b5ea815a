// A linear layer that a pre-quantized Hugging Face checkpoint stores as
// packed integer codes (GPTQ, AWQ) or FP8 E4M3 with scales, turned into
// GGUF rows of duet's own block types at load or by `duet convert`.
//
// The math of each format, w[o][i] for output o and input i, group g:
//   GPTQ  scale[g][o] * (q[i][o] - zero[g][o]); g = g_idx[i] (i / group_size
//         unless act-order scrambles it). qweight [in/8, out] int32 packs
//         inputs 8i..8i+7 in nibbles 0..7; qzeros [groups, out/8] packs
//         outputs the same way, each nibble the zero minus 1 in AutoGPTQ's
//         v1 format; scales [groups, out].
//   AWQ   the same formula with g = i / group_size, but qweight [in, out/8]
//         and qzeros [groups, out/8] pack outputs, in the order 0,2,4,6,1,3,5,7
//         (nibble k holds output 8c + order[k]); zeros stored as they are.
//   FP8   e4m3(weight[o][i]) * s, s one per tensor, per output row, or per
//         block of rows x cols (weight_scale_inv in DeepSeek/Qwen FP8
//         releases, weight_scale in compressed-tensors).
//
// Layouts they become (native()): codes in contiguous groups that are
// whole 32-blocks go to Q4_0 when every zero is 8 (x = (q - 8) * d: exact,
// d = the f16 scale) and to Q4_1 otherwise (x = q * d + m, d = scale exact,
// m = -scale * zero rounded once to f16: an error of at most 2^-11 of
// |scale * zero| <= 16 * scale, i.e. under 1/128 of one quantization step,
// the same for the 32 weights of a block). Act-order codes and FP8 have no
// exact 32-block form; they are dequantized in float and requantized to
// Q8_0 (8-bit codes under one f16 scale per 32: an added error of at most
// half a step, amax/254, per weight). A row that does not divide into
// 32-blocks stays F32.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/hf_quant_config.h"
#include "formats/safetensors.h"

namespace duet {

class QuantizedLinear {
 public:
  // The layer `prefix` (e.g. "model.layers.0.mlp.up_proj") of HF shape
  // [out, in], if the checkpoint stores it quantized; nullopt when it is a
  // plain float `prefix.weight` (layers a quantizer left alone, such as
  // lm_head). Every tensor's dtype and shape is checked against the config;
  // an error names the tensor. `dir` names the checkpoint in errors.
  static Result<std::optional<QuantizedLinear>> find(const SafetensorsCheckpoint& weights,
                                                     const HfQuantization& quant, const std::string& dir,
                                                     const std::string& prefix, int64_t out, int64_t in);

  int64_t out() const { return out_; }
  int64_t in() const { return in_; }
  // The checkpoint's tensors this layer accounts for.
  const std::vector<std::string>& sources() const { return sources_; }
  // The layout it repacks to when no dtype is asked for.
  DType native() const { return native_; }

  // All `out` rows in `type` (native(), Q8_0, F32, F16 or BF16), GGUF row r
  // from HF output row row_of(r), into dst (rows * row_bytes(type, in)).
  Status write(DType type, const std::function<int64_t(int64_t)>& row_of, uint8_t* dst) const;

 private:
  enum class Kind { kGptq, kAwq, kFp8 };

  Status find_int4(const SafetensorsCheckpoint& weights, const HfQuantization& quant, const std::string& dir);
  Status find_fp8(const SafetensorsCheckpoint& weights, const HfQuantization& quant, const std::string& dir);
  void choose_native();

  int code(int64_t i, int64_t o) const;    // int4: the 4-bit code of input i, output o
  int zero(int64_t g, int64_t o) const;    // int4: the real zero point
  float scale(int64_t g, int64_t o) const;  // int4: the group's scale
  uint16_t scale_f16(int64_t g, int64_t o) const;
  void dequantize_row(int64_t o, float* x) const;  // [in]
  void write_q4_row(int64_t o, DType type, uint8_t* dst) const;

  Kind kind_ = Kind::kGptq;
  std::string prefix_;
  int64_t out_ = 0, in_ = 0;
  const SafetensorsTensor* codes_ = nullptr;   // qweight, or the FP8 weight
  const SafetensorsTensor* zeros_ = nullptr;   // qzeros
  const SafetensorsTensor* scales_ = nullptr;  // scales, or weight_scale(_inv)
  int32_t zero_offset_ = 0;
  // int4: each input's group [in]; contiguous_ when that is i / group_size_.
  std::vector<int32_t> group_of_;
  int64_t group_size_ = 0;
  bool contiguous_ = true;
  // FP8: one scale per scale_rows_ x scale_cols_ block of [out, in].
  int64_t scale_rows_ = 0, scale_cols_ = 0;
  DType native_ = DType::F32;
  std::vector<std::string> sources_;
};

}  // namespace duet
