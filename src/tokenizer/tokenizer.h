// Text <-> token ids. One interface for every vocabulary kind; the concrete
// tokenizer is chosen from the model file's tokenizer.ggml.model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace duet {

class GgufFile;

// SentencePiece/GGUF token types.
enum class TokenType : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Reads tokenizer.ggml.* from a GGUF file (a full model or a vocab-only file).
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);

  // Ids for `text`; BOS first when add_bos. With parse_special, the text of
  // control/user-defined tokens (e.g. "<s>") becomes those tokens.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                      bool parse_special = false) const = 0;

  // The bytes token `id` stands for in the output ("▁" -> " ", "<0x0A>" ->
  // "\n"; control tokens -> ""). May be part of a UTF-8 character.
  virtual std::string decode_piece(int32_t id) const = 0;

  // Whole-sequence decode, as SentencePiece does it (drops the dummy-prefix
  // space of the first piece, skips control tokens).
  virtual std::string decode(const std::vector<int32_t>& ids) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token_text(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  TokenType token_type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos_default() const { return add_bos_; }
  bool strips_leading_space() const { return add_space_prefix_; }
  // End of generation: EOS, or any other end token the vocabulary names.
  virtual bool is_end_of_generation(int32_t id) const { return id == eos_id_; }
  // Fill-in-the-middle: the prefix, suffix and middle tokens
  // (tokenizer.ggml.fim_{pre,suf,mid}_token_id, or the older
  // {prefix,suffix,middle}_token_id); -1 where the file names none.
  int32_t fim_pre_id() const { return fim_pre_id_; }
  int32_t fim_suf_id() const { return fim_suf_id_; }
  int32_t fim_mid_id() const { return fim_mid_id_; }
  bool has_fim() const { return fim_pre_id_ >= 0 && fim_suf_id_ >= 0 && fim_mid_id_ >= 0; }

 protected:
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  int32_t bos_id_ = -1, eos_id_ = -1, unk_id_ = -1;
  int32_t fim_pre_id_ = -1, fim_suf_id_ = -1, fim_mid_id_ = -1;
  bool add_bos_ = true;
  bool add_space_prefix_ = true;
};

// Turns a stream of ids into text without ever splitting a UTF-8 character:
// bytes of an incomplete character are held back until it completes.
class StreamDetokenizer {
 public:
  explicit StreamDetokenizer(const Tokenizer& tok, bool first_is_start = true);
  // The newly complete text after `id` (may be empty).
  std::string push(int32_t id);
  // Whatever is held back at the end (invalid or truncated bytes, as U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool at_start_;
};

}  // namespace duet
