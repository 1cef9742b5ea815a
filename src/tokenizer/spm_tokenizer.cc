#include "tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <queue>

#include "formats/gguf.h"
#include "core/utf8.h"

namespace duet {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 '▁'

// "<0xNN>" -> NN, or -1.
int parse_byte_piece(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (char c : s.substr(3, 2)) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

// A token id named by `key`, or `fallback` when the key is absent or negative
// (some converters write -1 for "none").
Result<int32_t> optional_id(const GgufFile& f, const std::string& key, int32_t fallback,
                            size_t n_vocab) {
  const GgufValue* v = f.find(key);
  if (!v) return fallback;
  if (!v->is_integer()) return err(f.path(), ": ", key, " is not an integer");
  if (v->i64 < 0 && v->u64 == 0) return int32_t{-1};
  if (v->u64 >= n_vocab)
    return err(f.path(), ": ", key, " = ", v->u64, " is not below the vocabulary size ", n_vocab);
  return static_cast<int32_t>(v->u64);
}

Result<bool> optional_bool(const GgufFile& f, const std::string& key, bool fallback) {
  if (!f.has(key)) return fallback;
  return f.get_bool(key);
}

// '▁'-escapes spaces; each byte that does not begin a valid UTF-8 character
// becomes U+FFFD, as SentencePiece's normalizer does.
void append_escaped(std::string_view text, std::string& out) {
  size_t i = 0;
  while (i < text.size()) {
    const utf8::Prefix p = utf8::classify(text.substr(i));
    if (p.kind != utf8::Prefix::kValid) {
      out.append(utf8::kReplacement);
      i += 1;
    } else {
      if (text[i] == ' ') out.append(kSpace);
      else out.append(text.substr(i, p.len));
      i += p.len;
    }
  }
}

// One character or merged piece of the text being encoded, in a linked list.
struct Symbol {
  int32_t prev, next;
  uint32_t start, len;  // byte span in the text; len 0 once merged into its left neighbour
};

// A candidate merge of two neighbouring symbols.
struct Pair {
  float score;
  int32_t left, right;
  uint32_t len;  // left.len + right.len when proposed; stale if that changed
};

// Highest score first; among equal scores the leftmost.
struct PairOrder {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// Whether merges stay inside words: no UNUSED piece, and in every piece that
// can be merged '▁' appears only in its leading run.
bool words_are_independent(const std::vector<std::string>& tokens, const std::vector<TokenType>& types) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == TokenType::kUnused) return false;
    if (types[i] != TokenType::kNormal && types[i] != TokenType::kUserDefined) continue;
    std::string_view t = tokens[i];
    while (t.substr(0, kSpace.size()) == kSpace) t.remove_prefix(kSpace.size());
    if (t.find(kSpace) != std::string_view::npos) return false;
  }
  return true;
}

// Where the word after `from` starts: at a '▁' that follows another
// character (text.size() if none).
size_t next_word_start(std::string_view text, size_t from) {
  for (size_t at = text.find(kSpace, from + 1); at != std::string_view::npos; at = text.find(kSpace, at + 1))
    if (at < kSpace.size() || text.substr(at - kSpace.size(), kSpace.size()) != kSpace) return at;
  return text.size();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> SpmTokenizer::from_gguf(const GgufFile& f) {
  auto t = std::make_unique<SpmTokenizer>();
  DUET_ASSIGN(t->tokens_, f.get_strings("tokenizer.ggml.tokens"));
  const size_t n = t->tokens_.size();
  if (n == 0) return err(f.path(), ": tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX))
    return err(f.path(), ": tokenizer.ggml.tokens has ", n, " entries, more than ids can name");

  if (f.has("tokenizer.ggml.scores")) {
    DUET_ASSIGN(t->scores_, f.get_floats("tokenizer.ggml.scores"));
    if (t->scores_.size() != n)
      return err(f.path(), ": tokenizer.ggml.scores has ", t->scores_.size(),
                 " entries but tokenizer.ggml.tokens has ", n);
  } else {
    t->scores_.assign(n, 0.0f);
  }

  t->types_.assign(n, TokenType::kNormal);
  if (f.has("tokenizer.ggml.token_type")) {
    DUET_ASSIGN(std::vector<int32_t> raw, f.get_ints("tokenizer.ggml.token_type"));
    if (raw.size() != n)
      return err(f.path(), ": tokenizer.ggml.token_type has ", raw.size(),
                 " entries but tokenizer.ggml.tokens has ", n);
    for (size_t i = 0; i < n; ++i) {
      if (raw[i] < 1 || raw[i] > 6)
        return err(f.path(), ": tokenizer.ggml.token_type[", i, "] = ", raw[i],
                   " is not a token type (1..6)");
      t->types_[i] = static_cast<TokenType>(raw[i]);
    }
  }

  // Defaults are the Llama vocabulary's, as llama.cpp assumes for "llama".
  DUET_ASSIGN(t->bos_id_, optional_id(f, "tokenizer.ggml.bos_token_id", 1, n));
  DUET_ASSIGN(t->eos_id_, optional_id(f, "tokenizer.ggml.eos_token_id", 2, n));
  DUET_ASSIGN(t->unk_id_, optional_id(f, "tokenizer.ggml.unknown_token_id", 0, n));
  DUET_ASSIGN(t->eot_id_, optional_id(f, "tokenizer.ggml.eot_token_id", -1, n));
  DUET_ASSIGN(t->add_bos_, optional_bool(f, "tokenizer.ggml.add_bos_token", true));
  DUET_ASSIGN(t->add_space_prefix_, optional_bool(f, "tokenizer.ggml.add_space_prefix", true));

  t->byte_ids_.fill(-1);
  t->byte_of_token_.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = t->tokens_[i];
    const auto id = static_cast<int32_t>(i);
    switch (t->types_[i]) {
      case TokenType::kByte: {
        const int b = parse_byte_piece(text);
        if (b < 0)
          return err(f.path(), ": byte token ", i, " is '", text, "', not of the form <0xNN>");
        if (t->byte_ids_[b] < 0) t->byte_ids_[b] = id;
        t->byte_of_token_[i] = static_cast<int16_t>(b);
        break;
      }
      case TokenType::kUserDefined:
      case TokenType::kNormal:
      case TokenType::kUnused:
        t->pieces_.try_emplace(text, id);
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
        break;  // found in the text only as special tokens
    }
  }
  t->split_words_ = words_are_independent(t->tokens_, t->types_);
  t->specials_ = SpecialTokens(t->tokens_, t->types_);
  if (f.has("general.name")) {
    DUET_ASSIGN(const std::string name, f.get_string("general.name"));
    t->specials_.apply_model_rules(name);
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

int32_t SpmTokenizer::merge_id(std::string_view piece) const {
  const auto it = pieces_.find(piece);
  return it == pieces_.end() ? -1 : it->second;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos,
                                          bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);

  // Special-token texts split the input into runs of plain text. As in
  // llama.cpp, every run that starts the text or follows a special token gets
  // the dummy-prefix space.
  bool after_special = true;
  std::vector<SpecialTokens::Piece> pieces;
  specials_.partition(text, parse_special, pieces);
  for (const SpecialTokens::Piece& p : pieces) {
    if (p.id >= 0) {
      out.push_back(p.id);
      after_special = true;
      continue;
    }
    std::string escaped;
    if (add_space_prefix_ && after_special) escaped = kSpace;
    append_escaped(text.substr(p.begin, p.end - p.begin), escaped);
    encode_run(escaped, out);
    after_special = false;
  }
  return out;
}

void SpmTokenizer::encode_run(std::string_view text, std::vector<int32_t>& out) const {
  bool prev_unk = false;
  if (!split_words_) return encode_span(text, prev_unk, out);
  for (size_t at = 0; at < text.size();) {
    const size_t end = next_word_start(text, at);
    encode_span(text.substr(at, end - at), prev_unk, out);
    at = end;
  }
}

void SpmTokenizer::encode_span(std::string_view text, bool& prev_unk, std::vector<int32_t>& out) const {
  // Characters as symbols.
  std::vector<Symbol> syms;
  for (size_t i = 0; i < text.size();) {
    const uint32_t len = static_cast<uint32_t>(utf8::classify(text.substr(i)).len);
    const auto idx = static_cast<int32_t>(syms.size());
    syms.push_back({idx - 1, idx + 1, static_cast<uint32_t>(i), len});
    i += len;
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  // Pieces that are UNUSED tokens may be formed while merging but are split
  // back into the halves they were made of (SentencePiece's resegmentation).
  std::unordered_map<std::string_view, uint32_t> unused_split;  // piece -> left length
  std::priority_queue<Pair, std::vector<Pair>, PairOrder> agenda;
  auto propose = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = syms[left].len + syms[right].len;
    const std::string_view piece = text.substr(syms[left].start, len);
    const int32_t id = merge_id(piece);
    if (id < 0) return;
    agenda.push({scores_[id], left, right, len});
    if (types_[id] == TokenType::kUnused) unused_split[piece] = syms[left].len;
  };
  for (size_t i = 1; i < syms.size(); ++i) propose(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!agenda.empty()) {
    const Pair p = agenda.top();
    agenda.pop();
    Symbol& l = syms[p.left];
    Symbol& r = syms[p.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    propose(l.prev, p.left);
    propose(p.left, l.next);
  }

  // Symbols to ids. A piece outside the vocabulary becomes its bytes' tokens,
  // or one UNK for a whole stretch of such pieces when there are no byte tokens.
  auto emit = [&](auto&& self, std::string_view piece) -> void {
    const int32_t id = merge_id(piece);
    if (id >= 0 && types_[id] == TokenType::kUnused) {
      if (const auto it = unused_split.find(piece); it != unused_split.end()) {
        self(self, piece.substr(0, it->second));
        self(self, piece.substr(it->second));
        return;
      }
    }
    if (id >= 0) {
      out.push_back(id);
      prev_unk = false;
      return;
    }
    bool have_bytes = true;
    for (char c : piece) have_bytes = have_bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (have_bytes) {
      for (char c : piece) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      prev_unk = false;
      return;
    }
    if (!prev_unk && unk_id_ >= 0) out.push_back(unk_id_);
    prev_unk = true;
  };
  for (int32_t i = 0; i >= 0; i = syms[i].next) emit(emit, text.substr(syms[i].start, syms[i].len));
}

std::string SpmTokenizer::decode_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return "";
  switch (types_[id]) {
    case TokenType::kControl:
      return "";
    case TokenType::kByte:
      return std::string(1, static_cast<char>(byte_of_token_[id]));
    case TokenType::kUnknown:
      return " \xE2\x81\x87 ";  // " ⁇ ", SentencePiece's surface for <unk>
    default:
      break;
  }
  const std::string& piece = tokens_[id];
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (std::string_view(piece).substr(i, kSpace.size()) == kSpace) {
      out.push_back(' ');
      i += kSpace.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

}  // namespace duet
