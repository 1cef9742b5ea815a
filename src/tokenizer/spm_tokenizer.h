// SentencePiece BPE over a GGUF "llama" vocabulary (Llama 1/2, TinyLlama,
// Mistral v0.1, llama2.c's tok512...): pieces with scores, '▁' for spaces, a
// dummy-prefix space, and <0xNN> byte tokens for characters outside the vocab.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace duet {

class SpmTokenizer : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);

  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const override;
  std::string decode_piece(int32_t id) const override;
  bool is_end_of_generation(int32_t id) const override {
    return id == eos_id_ || (eot_id_ >= 0 && id == eot_id_);
  }

 private:
  // Lets the piece map be searched with string_views of the input.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using PieceMap = std::unordered_map<std::string, int32_t, Hash, std::equal_to<>>;

  // BPE over one run of text (already '▁'-escaped, valid UTF-8); appends ids.
  // Word by word where no merge can cross a word's start (split_words_).
  void encode_run(std::string_view text, std::vector<int32_t>& out) const;
  // BPE over one stretch of a run. `prev_unk`: the stretch before ended in
  // an UNK, which a following unknown piece joins.
  void encode_span(std::string_view text, bool& prev_unk, std::vector<int32_t>& out) const;
  // The id for `piece`, or -1 when it cannot take part in merges.
  int32_t merge_id(std::string_view piece) const;

  std::vector<float> scores_;
  PieceMap pieces_;                     // NORMAL, USER_DEFINED and UNUSED pieces
  std::array<int32_t, 256> byte_ids_;   // <0xNN> token per byte, -1 if absent
  std::vector<int16_t> byte_of_token_;  // per id: the byte of a BYTE token, else -1
  SpecialTokens specials_;  // matched in the input before BPE runs
  int32_t eot_id_ = -1;
  // No piece holds a '▁' after another character ('▁' only leads), so no
  // merge crosses the start of a word and each word's merges are those it
  // gets within the whole text; and no UNUSED piece, whose resegmentation
  // reads every merge proposed so far. A 1 MiB run took 0.6 s as one heap
  // of a million candidate pairs, most of the time in its cache misses.
  bool split_words_ = false;
};

}  // namespace duet
