// karpathy/llama2.c checkpoints (.bin) and tokenizers (tokenizer.bin), read
// for import into GGUF (`duet convert --from llama2c`).
//
// Checkpoint layouts (all little-endian):
//  - legacy ("version 0"): 7 int32 (dim, hidden_dim, n_layers, n_heads,
//    n_kv_heads, vocab_size, seq_len; vocab_size < 0 = classifier not shared),
//    then fp32 tensors in run.c order, the freq_cis tables, then wcls when not
//    shared.
//  - export version 1: 256-byte header (uint32 magic "ak42", int32 version,
//    the 7 int32, uint8 shared_classifier), fp32 tensors with the norms first
//    and no freq_cis tables.
//  - export version 2: as version 1 plus int32 group_size in the header; the
//    norms stay fp32, every matrix is int8 followed by one fp32 scale per
//    group (symmetric Q8_0).
// Every size is checked against the file before anything is read.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/model_config.h"

namespace duet {

// One fp32 weight in torch layout: shape {rows, cols} (out, in) or {n}, row-major.
struct Llama2cWeight {
  std::vector<int64_t> shape;
  const float* data = nullptr;  // into the mapping, or into dequantized storage

  int64_t elements() const;
};

struct Llama2cLayer {
  Llama2cWeight rms_att;  // (dim)
  Llama2cWeight wq;       // (n_heads * head_size, dim)
  Llama2cWeight wk;       // (kv_dim, dim)
  Llama2cWeight wv;       // (kv_dim, dim)
  Llama2cWeight wo;       // (dim, n_heads * head_size)
  Llama2cWeight rms_ffn;  // (dim)
  Llama2cWeight w1;       // (hidden_dim, dim)  gate
  Llama2cWeight w2;       // (dim, hidden_dim)  down
  Llama2cWeight w3;       // (hidden_dim, dim)  up
};

struct Llama2cCheckpoint {
  // The header's dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
  // and seq_len, with tied_output for a shared classifier and the Llama 2
  // values llama2.c trains and runs with (RoPE base 1e4, RMSNorm eps 1e-5).
  ModelConfig config;
  int32_t version = 0;     // 0 = legacy header, else the export version
  int32_t group_size = 0;  // version 2 only
  Llama2cWeight token_embedding;       // (n_vocab, dim)
  std::vector<Llama2cLayer> layers;
  Llama2cWeight rms_final;             // (dim)
  std::optional<Llama2cWeight> wcls;   // (n_vocab, dim); absent when shared

  MappedFile file;
  std::deque<std::vector<float>> dequantized;  // owns version-2 weights
};

Result<Llama2cCheckpoint> read_llama2c_checkpoint(const std::string& path);

// A tokenizer.bin: pieces as llama2.c stores them ('▁' already turned into
// ' ', BOS/EOS as "\n<s>\n" / "\n</s>\n").
struct Llama2cTokenizer {
  int32_t max_token_length = 0;
  std::vector<std::string> pieces;
  std::vector<float> scores;
};

// The file does not store its token count: tokens are read up to the end of
// the file, which must end exactly after the last one.
Result<Llama2cTokenizer> read_llama2c_tokenizer(const std::string& path);

}  // namespace duet
