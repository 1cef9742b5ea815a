// Byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek, Falcon, StarCoder, MPT
// vocabularies; tokenizer.ggml.model "gpt2"). Encoding: added tokens are cut
// out of the raw text first (special_tokens.h), the rest is pre-tokenized
// into words (pretokenizer.h), each word's UTF-8 bytes become GPT-2 alphabet
// symbols, and merges apply inside a word in rank order.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace duet {

// Merge rules keyed by the pair of token ids they join: an open-addressing
// hash table, because encoding looks a pair up for every neighbour change.
class BpeMerges {
 public:
  struct Merge {
    int32_t rank;
    int32_t result;  // the id of the joined token
  };
  void reserve(size_t n);
  // Keeps the first rule for a pair (the lower rank) when one repeats.
  void add(int32_t left, int32_t right, Merge m);
  const Merge* find(int32_t left, int32_t right) const;

 private:
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  size_t slot(uint64_t k) const { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_); }
  static constexpr uint64_t kEmpty = ~0ull;
  std::vector<uint64_t> keys_;  // (capacity), kEmpty where free
  std::vector<Merge> merges_;   // (capacity)
  size_t size_ = 0;
  int shift_ = 64;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Reads tokens, token_type, merges, pre, the special ids and add_bos_token /
  // add_eos_token; every id and the pre-tokenizer name are checked.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);

  // Control tokens (BOS, <|eot_id|>, ...) are recognized in the text only
  // with parse_special; user-defined tokens always are (as Hugging Face and
  // llama.cpp do), in llama.cpp's order (special_tokens.h). add_bos asks for the vocabulary's framing: BOS first, and
  // EOS last when the file sets add_eos_token.
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const override;
  std::string decode_piece(int32_t id) const override;
  bool is_end_of_generation(int32_t id) const override;

  PreTokenizer pre_tokenizer() const { return pre_; }
  int32_t eot_id() const { return eot_id_; }

 private:
  struct Scratch;
  void encode_plain(std::string_view text, Scratch& s, std::vector<int32_t>& out) const;
  void encode_word(std::string_view bytes, Scratch& s, std::vector<int32_t>& out) const;

  PreTokenizer pre_ = PreTokenizer::kGpt2;
  bool add_eos_ = false;
  // Llama 3 (like its tokenizer.json): a word that is a token is emitted whole.
  bool ignore_merges_ = false;
  int32_t eot_id_ = -1, eom_id_ = -1;
  std::array<int32_t, 256> byte_token_{};  // -1 where the vocabulary has no such byte
  std::array<std::string, 256> byte_text_;  // each byte's symbol in the GPT-2 alphabet, as UTF-8
  BpeMerges merges_;
  std::unordered_map<std::string, int32_t> token_ids_;  // for ignore_merges_
  std::vector<std::string> pieces_;                     // (n_vocab) bytes each token stands for
  SpecialTokens specials_;
};

}  // namespace duet
