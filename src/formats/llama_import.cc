#include "formats/llama_import.h"

#include "formats/file_type.h"
#include "formats/llama_names.h"

namespace duet {
namespace {

namespace n = gguf_names;

constexpr const char* kArch = "llama";
constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's escaped space

bool is_byte_piece(const std::string& s) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && hex(s[3]) && hex(s[4]) && s[5] == '>';
}

std::string spaces_to_sentencepiece(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == ' ')
      out += kSpace;
    else
      out += c;
  }
  return out;
}

}  // namespace

void set_llama_vocab(GgufWriter& w, const LlamaVocab& v) {
  w.set(n::kTokModel, GgufValue::of_string("llama"));
  w.set(n::kTokTokens, GgufValue::of_strings(v.tokens));
  w.set(n::kTokScores, GgufValue::of_f32s(v.scores));
  w.set(n::kTokTypes, GgufValue::of_i32s(v.types));
  if (v.bos_id >= 0) w.set(n::kTokBos, GgufValue::of_u32(static_cast<uint32_t>(v.bos_id)));
  if (v.eos_id >= 0) w.set(n::kTokEos, GgufValue::of_u32(static_cast<uint32_t>(v.eos_id)));
  if (v.unk_id >= 0) w.set(n::kTokUnk, GgufValue::of_u32(static_cast<uint32_t>(v.unk_id)));
  if (v.pad_id >= 0) w.set(n::kTokPad, GgufValue::of_u32(static_cast<uint32_t>(v.pad_id)));
  w.set(n::kTokAddBos, GgufValue::of_bool(true));
  w.set(n::kTokAddEos, GgufValue::of_bool(false));
  if (v.add_space_prefix) w.set(n::kTokAddSpacePrefix, GgufValue::of_bool(*v.add_space_prefix));
}

namespace {

// torch (out, in) row-major is ggml ne = [in, out]: the shape reversed.
Status add_weight(GgufWriter& w, const std::string& name, const Llama2cWeight& t) {
  std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
  return w.add_tensor(name, DType::F32, std::move(ne), t.data,
                      static_cast<size_t>(t.elements()) * sizeof(float));
}

}  // namespace

LlamaVocab vocab_from_llama2c(const Llama2cTokenizer& tok) {
  LlamaVocab v;
  v.scores = tok.scores;
  v.tokens.reserve(tok.pieces.size());
  v.types.reserve(tok.pieces.size());
  for (const std::string& p : tok.pieces) {
    SpmPieceType type = SpmPieceType::kNormal;
    std::string piece;
    if (p == "\n<s>\n" || p == "\n</s>\n") {
      piece = p.substr(1, p.size() - 2);
      type = SpmPieceType::kControl;
    } else if (p == "<unk>") {
      piece = p;
      type = SpmPieceType::kUnknown;
    } else if (is_byte_piece(p)) {
      piece = p;
      type = SpmPieceType::kByte;
    } else {
      piece = spaces_to_sentencepiece(p);
    }
    v.tokens.push_back(std::move(piece));
    v.types.push_back(static_cast<int32_t>(type));
  }
  // run.c hard-codes BOS 1 and EOS 2 (and sentencepiece's default unk 0), and
  // its encoder always prepends the dummy-prefix space.
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_space_prefix = true;
  return v;
}

Result<LlamaVocab> vocab_from_spm(const SpmModel& m, const std::string& name) {
  if (m.model_type != SpmModelType::kBpe && m.model_type != SpmModelType::kUnigram)
    return err(name, ": SentencePiece model type ", static_cast<int32_t>(m.model_type),
               " (WORD or CHAR) has no GGUF 'llama' tokenizer equivalent; supported: BPE, UNIGRAM");
  LlamaVocab v;
  v.tokens.reserve(m.pieces.size());
  v.scores.reserve(m.pieces.size());
  v.types.reserve(m.pieces.size());
  for (const SpmPiece& p : m.pieces) {
    v.tokens.push_back(p.piece);
    v.scores.push_back(p.score);
    v.types.push_back(static_cast<int32_t>(p.type));
  }
  v.unk_id = m.unk_id;
  v.bos_id = m.bos_id;
  v.eos_id = m.eos_id;
  v.pad_id = m.pad_id;
  v.add_space_prefix = m.add_dummy_prefix;
  return v;
}

GgufWriter vocab_only_gguf(const LlamaVocab& vocab, const std::string& name) {
  GgufWriter w;
  w.set(n::kArchitecture, GgufValue::of_string(kArch));
  w.set(n::kName, GgufValue::of_string(name));
  set_llama_vocab(w, vocab);
  return w;
}

Result<GgufWriter> llama2c_gguf(const Llama2cCheckpoint& ck, const LlamaVocab& vocab,
                                const std::string& name) {
  ModelConfig c = ck.config;
  if (vocab.tokens.size() != static_cast<size_t>(c.n_vocab))
    return err("tokenizer has ", vocab.tokens.size(), " tokens but the checkpoint's vocab_size is ",
               c.n_vocab);
  c.name = name;
  GgufWriter w;
  write_model_config(w, c);
  DUET_ASSIGN(const uint32_t file_type, llama_file_type(DType::F32));
  w.set(n::kFileType, GgufValue::of_u32(file_type));
  set_llama_vocab(w, vocab);

  // llama2.c's Q and K rows are already in the interleaved-pair RoPE order
  // that GGUF "llama" expects, so no permutation is applied.
  DUET_TRY(add_weight(w, n::kTokenEmbd, ck.token_embedding));
  for (size_t i = 0; i < ck.layers.size(); ++i) {
    const Llama2cLayer& l = ck.layers[i];
    const int b = static_cast<int>(i);
    DUET_TRY(add_weight(w, n::blk(b, n::kAttnNorm), l.rms_att));
    DUET_TRY(add_weight(w, n::blk(b, n::kAttnQ), l.wq));
    DUET_TRY(add_weight(w, n::blk(b, n::kAttnK), l.wk));
    DUET_TRY(add_weight(w, n::blk(b, n::kAttnV), l.wv));
    DUET_TRY(add_weight(w, n::blk(b, n::kAttnOut), l.wo));
    DUET_TRY(add_weight(w, n::blk(b, n::kFfnNorm), l.rms_ffn));
    DUET_TRY(add_weight(w, n::blk(b, n::kFfnGate), l.w1));
    DUET_TRY(add_weight(w, n::blk(b, n::kFfnDown), l.w2));
    DUET_TRY(add_weight(w, n::blk(b, n::kFfnUp), l.w3));
  }
  DUET_TRY(add_weight(w, n::kOutputNorm, ck.rms_final));
  if (ck.wcls) DUET_TRY(add_weight(w, n::kOutput, *ck.wcls));
  return w;
}

}  // namespace duet
