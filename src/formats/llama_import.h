// Turns imported checkpoints and vocabularies into GGUF files of
// architecture "llama" with llama.cpp's names (formats/llama_names.h), so the
// result loads in duet and in other GGUF tools alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/llama2c.h"
#include "formats/spm_model.h"

namespace duet {

// A SentencePiece-style vocabulary as GGUF stores it (tokenizer.ggml.model = "llama").
struct LlamaVocab {
  std::vector<std::string> tokens;  // SentencePiece pieces ('▁' for space)
  std::vector<float> scores;
  std::vector<int32_t> types;       // SpmPieceType values
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t unk_id = 0;
  int32_t pad_id = -1;              // -1: none, key not written
  std::optional<bool> add_space_prefix;
};

// The tokenizer.ggml.* keys of `vocab` (BOS added, EOS not, as llama.cpp's
// converters write for SentencePiece vocabularies).
void set_llama_vocab(GgufWriter& w, const LlamaVocab& vocab);

// llama2.c's tokenizer.bin holds the pieces of a SentencePiece model with
// '▁' turned into ' ' and BOS/EOS written as "\n<s>\n" / "\n</s>\n"; this
// restores the SentencePiece forms and types (UNKNOWN, CONTROL, BYTE).
LlamaVocab vocab_from_llama2c(const Llama2cTokenizer& tok);

// Error for model types GGUF's "llama" tokenizer cannot express (WORD, CHAR).
Result<LlamaVocab> vocab_from_spm(const SpmModel& model, const std::string& name);

// general.architecture + tokenizer metadata only ("vocab-only" GGUF).
GgufWriter vocab_only_gguf(const LlamaVocab& vocab, const std::string& name);

// A full F32 model. The vocabulary's size must equal the checkpoint's.
// A shared classifier is written as no output.weight (tied embeddings, which
// llama.cpp and duet both read as output = token_embd), so the file does not
// carry the embedding twice.
Result<GgufWriter> llama2c_gguf(const Llama2cCheckpoint& ck, const LlamaVocab& vocab,
                                const std::string& name);

}  // namespace duet
