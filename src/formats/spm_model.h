// SentencePiece tokenizer.model files: a serialized sentencepiece.ModelProto,
// read with a small bounds-checked protobuf wire-format reader. Only the
// fields a GGUF vocabulary needs are kept; everything else is skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace duet {

// ModelProto.SentencePiece.Type; GGUF's tokenizer.ggml.token_type uses the same values.
enum class SpmPieceType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// TrainerSpec.ModelType.
enum class SpmModelType : int32_t { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

struct SpmPiece {
  std::string piece;
  float score = 0;
  SpmPieceType type = SpmPieceType::kNormal;
};

// Defaults are the proto's declared defaults, used when a field is absent.
struct SpmModel {
  std::vector<SpmPiece> pieces;
  // TrainerSpec
  SpmModelType model_type = SpmModelType::kUnigram;
  bool byte_fallback = false;
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;  // -1: none
  // NormalizerSpec
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// `name` labels errors (usually the path).
Result<SpmModel> parse_spm_model(std::string_view bytes, const std::string& name);
Result<SpmModel> read_spm_model(const std::string& path);

}  // namespace duet
