#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <limits>

#include "core/utf8.h"
#include "formats/gguf.h"
#include "tokenizer/byte_unicode.h"

namespace duet {

// ---------------------------------------------------------------- merges

void BpeMerges::reserve(size_t n) {
  size_t cap = 16;
  shift_ = 60;
  while (cap < 2 * n) {
    cap *= 2;
    --shift_;
  }
  keys_.assign(cap, kEmpty);
  merges_.assign(cap, Merge{0, 0});
  size_ = 0;
}

void BpeMerges::add(int32_t left, int32_t right, Merge m) {
  if (2 * (size_ + 1) > keys_.size()) {
    // Grow: rehash what is there into twice the room.
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<Merge> old_merges = std::move(merges_);
    reserve(std::max<size_t>(old_keys.size(), 8));
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) {
        add(static_cast<int32_t>(old_keys[i] >> 32), static_cast<int32_t>(old_keys[i] & 0xFFFFFFFFu),
            old_merges[i]);
      }
    }
  }
  const uint64_t k = key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t i = slot(k);; i = (i + 1) & mask) {
    if (keys_[i] == k) return;
    if (keys_[i] == kEmpty) {
      keys_[i] = k;
      merges_[i] = m;
      ++size_;
      return;
    }
  }
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  if (keys_.empty()) return nullptr;
  const uint64_t k = key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t i = slot(k);; i = (i + 1) & mask) {
    if (keys_[i] == k) return &merges_[i];
    if (keys_[i] == kEmpty) return nullptr;
  }
}

// ---------------------------------------------------------------- loading

namespace {

constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";

// Reads an optional token id; an id outside the vocabulary is an error.
Status read_id(const GgufFile& f, const std::string& key, size_t n_vocab, int32_t& id) {
  if (!f.has(key)) return {};
  DUET_ASSIGN(const uint64_t v, f.get_uint(key));
  if (v >= n_vocab) return err(f.path(), ": ", key, " = ", v, " is not a token id (n_vocab ", n_vocab, ")");
  id = static_cast<int32_t>(v);
  return {};
}

Status read_flag(const GgufFile& f, const std::string& key, bool& flag) {
  if (!f.has(key)) return {};
  DUET_ASSIGN(flag, f.get_bool(key));
  return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::from_gguf(const GgufFile& f) {
  auto t = std::make_unique<BpeTokenizer>();
  DUET_ASSIGN(t->tokens_, f.get_strings(kTokensKey));
  const size_t n = t->tokens_.size();
  if (n == 0) return err(f.path(), ": ", kTokensKey, " is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return err(f.path(), ": ", kTokensKey, " has ", n, " tokens, more than int32 ids can name");
  }

  t->types_.assign(n, TokenType::kNormal);
  if (f.has(kTypesKey)) {
    DUET_ASSIGN(const std::vector<int32_t> types, f.get_ints(kTypesKey));
    if (types.size() != n) {
      return err(f.path(), ": ", kTypesKey, " has ", types.size(), " entries for ", n, " tokens");
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 1 || types[i] > 6) {
        return err(f.path(), ": ", kTypesKey, "[", i, "] = ", types[i], " is not a token type (1..6)");
      }
      t->types_[i] = static_cast<TokenType>(types[i]);
    }
  }

  // A file written before the key existed gets llama.cpp's "default" rule.
  std::string pre_name = "default";
  if (f.has("tokenizer.ggml.pre")) {
    DUET_ASSIGN(pre_name, f.get_string("tokenizer.ggml.pre"));
  }
  Result<PreTokenizerInfo> pre = pre_tokenizer_from_name(pre_name);
  if (!pre) return err(f.path(), ": ", pre.error().message);
  t->pre_ = pre->rule;
  t->ignore_merges_ = pre->ignore_merges;

  DUET_TRY(read_id(f, "tokenizer.ggml.bos_token_id", n, t->bos_id_));
  DUET_TRY(read_id(f, "tokenizer.ggml.eos_token_id", n, t->eos_id_));
  DUET_TRY(read_id(f, "tokenizer.ggml.unknown_token_id", n, t->unk_id_));
  DUET_TRY(read_id(f, "tokenizer.ggml.eot_token_id", n, t->eot_id_));
  DUET_TRY(read_id(f, "tokenizer.ggml.eom_token_id", n, t->eom_id_));
  // Byte-level BPE has no dummy prefix. BOS is added as the file says, or
  // where it does not, as llama.cpp does for its pre-tokenizer (Llama 3 yes,
  // GPT-2 no); EOS only when the file asks.
  t->add_space_prefix_ = false;
  t->add_bos_ = pre->add_bos;
  DUET_TRY(read_flag(f, "tokenizer.ggml.add_bos_token", t->add_bos_));
  DUET_TRY(read_flag(f, "tokenizer.ggml.add_eos_token", t->add_eos_));

  t->token_ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) t->token_ids_.emplace(t->tokens_[i], static_cast<int32_t>(i));
  auto id_of = [&](const std::string& s) {
    auto it = t->token_ids_.find(s);
    return it == t->token_ids_.end() ? -1 : it->second;
  };

  // Chat formats name their end-of-turn token only by its text in older files.
  if (t->eot_id_ < 0) {
    for (const char* s : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"}) {
      if (int32_t id = id_of(s); id >= 0 && t->eot_id_ < 0) t->eot_id_ = id;
    }
  }
  if (t->eom_id_ < 0) t->eom_id_ = id_of("<|eom_id|>");

  DUET_ASSIGN(const std::vector<std::string> merges, f.get_strings(kMergesKey));
  if (merges.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return err(f.path(), ": ", kMergesKey, " has too many entries (", merges.size(), ")");
  }
  t->merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size()) {
      return err(f.path(), ": ", kMergesKey, "[", i, "] '", m, "' is not two tokens separated by a space");
    }
    const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    const int32_t l = id_of(left), r = id_of(right), joined = id_of(left + right);
    // A rule whose parts or result are not tokens can never produce an id.
    if (l < 0 || r < 0 || joined < 0) continue;
    t->merges_.add(l, r, {static_cast<int32_t>(i), joined});
  }

  for (int b = 0; b < 256; ++b) {
    std::string& text = t->byte_text_[static_cast<size_t>(b)];
    utf8::append(byte_to_codepoint(static_cast<uint8_t>(b)), text);
    t->byte_token_[static_cast<size_t>(b)] = id_of(text);
  }

  t->pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const TokenType type = t->types_[i];
    if (type == TokenType::kControl) continue;
    // Added tokens are plain text; the rest is spelled in the GPT-2 alphabet.
    if (type == TokenType::kUserDefined || !byte_level_decode(t->tokens_[i], t->pieces_[i])) {
      t->pieces_[i] = t->tokens_[i];
    }
  }

  t->specials_ = SpecialTokens(t->tokens_, t->types_);
  if (f.has("general.name")) {
    DUET_ASSIGN(const std::string name, f.get_string("general.name"));
    t->specials_.apply_model_rules(name);
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

// ---------------------------------------------------------------- encoding

// Buffers reused across the words of one encode call.
struct BpeTokenizer::Scratch {
  std::vector<uint32_t> cps;  // (code points of the current plain segment)
  std::vector<size_t> ends;   // (words) end of each word in cps
  std::string word;           // UTF-8 bytes of the current word
  std::string spelled;        // the word in the GPT-2 alphabet
  struct Symbol {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev, next;  // -1 at the ends
  };
  std::vector<Symbol> symbols;  // (bytes of the word)
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, result;
    // std heap is a max-heap: "less" means a later merge (higher rank, then further right).
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::vector<Candidate> heap;
};

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  Scratch s;
  std::vector<SpecialTokens::Piece> pieces;
  specials_.partition(text, parse_special, pieces);
  for (const SpecialTokens::Piece& p : pieces) {
    if (p.id >= 0) out.push_back(p.id);
    else encode_plain(text.substr(p.begin, p.end - p.begin), s, out);
  }
  if (add_bos && add_eos_ && eos_id_ >= 0) out.push_back(eos_id_);
  return out;
}

void BpeTokenizer::encode_plain(std::string_view text, Scratch& s, std::vector<int32_t>& out) const {
  s.cps.clear();
  decode_utf8_lossy(text, s.cps);
  s.ends.clear();
  pre_tokenize(pre_, s.cps, s.ends);
  size_t begin = 0;
  for (size_t end : s.ends) {
    s.word.clear();
    for (size_t i = begin; i < end; ++i) utf8::append(s.cps[i], s.word);
    encode_word(s.word, s, out);
    begin = end;
  }
}

void BpeTokenizer::encode_word(std::string_view bytes, Scratch& s, std::vector<int32_t>& out) const {
  if (ignore_merges_ && bytes.size() > 1) {
    s.spelled.clear();
    for (char c : bytes) s.spelled += byte_text_[static_cast<uint8_t>(c)];
    auto it = token_ids_.find(s.spelled);
    if (it != token_ids_.end() && types_[static_cast<size_t>(it->second)] == TokenType::kNormal) {
      out.push_back(it->second);
      return;
    }
  }

  // One symbol per byte. A byte the vocabulary lacks becomes UNK, or is
  // dropped when there is no UNK either (as llama.cpp does).
  auto& sym = s.symbols;
  sym.clear();
  for (char c : bytes) {
    int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) id = unk_id_;
    if (id < 0) continue;
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({id, i - 1, -1});
    if (i > 0) sym[static_cast<size_t>(i - 1)].next = i;
  }
  if (sym.empty()) return;

  auto& heap = s.heap;
  heap.clear();
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[static_cast<size_t>(left)].next;
    if (right < 0) return;
    const int32_t lid = sym[static_cast<size_t>(left)].id, rid = sym[static_cast<size_t>(right)].id;
    if (const BpeMerges::Merge* m = merges_.find(lid, rid)) {
      heap.push_back({m->rank, left, right, lid, rid, m->result});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);

  // Lowest rank first, leftmost among equals. An entry is stale when either
  // side has merged since it was queued; its ids then no longer match.
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Scratch::Candidate c = heap.back();
    heap.pop_back();
    auto& l = sym[static_cast<size_t>(c.left)];
    auto& r = sym[static_cast<size_t>(c.right)];
    if (l.id != c.left_id || r.id != c.right_id || l.next != c.right) continue;
    l.id = c.result;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.left;
    r.id = -1;
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) out.push_back(sym[static_cast<size_t>(i)].id);
}

// ---------------------------------------------------------------- decoding

std::string BpeTokenizer::decode_piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return {};
  return pieces_[static_cast<size_t>(id)];
}

bool BpeTokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && (id == eos_id_ || id == eot_id_ || id == eom_id_);
}

}  // namespace duet
