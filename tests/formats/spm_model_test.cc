// SentencePiece tokenizer.model reading: the real Llama 2 model against
// llama.cpp's vocab GGUF of it, hand-built messages, and garbage.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "formats/gguf.h"
#include "formats/llama_import.h"
#include "formats/llama_names.h"
#include "formats/spm_model.h"
#include "formats/vocab_expect.h"
#include "test_util.h"

namespace duet {
namespace {

using testing::shared_path;
namespace n = gguf_names;

const std::string kLlama2Model = "tokenizers/llama2/tokenizer.model";

// A minimal protobuf encoder for building test messages.
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string tag(uint32_t field, uint32_t wire) { return varint(uint64_t{field} << 3 | wire); }
std::string f_varint(uint32_t field, int64_t v) { return tag(field, 0) + varint(static_cast<uint64_t>(v)); }
std::string f_len(uint32_t field, const std::string& bytes) { return tag(field, 2) + varint(bytes.size()) + bytes; }
std::string f_float(uint32_t field, float v) {
  std::string s = tag(field, 5);
  s.append(reinterpret_cast<const char*>(&v), 4);
  return s;
}
std::string piece(const std::string& text, float score, int type) {
  return f_len(1, f_len(1, text) + f_float(2, score) + f_varint(3, type));
}
std::string unk_bos_eos() { return piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3); }

Result<SpmModel> parse(const std::string& bytes) { return parse_spm_model(bytes, "test.model"); }

std::string parse_error(const std::string& bytes) { return testing::failure_message(parse(bytes)); }

TEST(SpmModel, Llama2TokenizerModel) {
  auto m = read_spm_model(shared_path(kLlama2Model));
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->pieces.size(), 32000u);
  EXPECT_EQ(m->model_type, SpmModelType::kBpe);
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->unk_id, 0);
  EXPECT_EQ(m->bos_id, 1);
  EXPECT_EQ(m->eos_id, 2);
  EXPECT_EQ(m->pad_id, -1);
  EXPECT_TRUE(m->add_dummy_prefix);
  EXPECT_EQ(m->pieces[0].piece, "<unk>");
  EXPECT_EQ(m->pieces[0].type, SpmPieceType::kUnknown);
  EXPECT_EQ(m->pieces[1].type, SpmPieceType::kControl);
  EXPECT_EQ(m->pieces[3].piece, "<0x00>");
  EXPECT_EQ(m->pieces[3].type, SpmPieceType::kByte);
  EXPECT_EQ(m->pieces[259].type, SpmPieceType::kNormal);
}

// llama.cpp's own vocab-only GGUF of the same vocabulary: identical arrays.
TEST(SpmModel, VocabOnlyMatchesLlamaCpp) {
  auto m = read_spm_model(shared_path(kLlama2Model));
  ASSERT_TRUE(m.ok());
  auto v = vocab_from_spm(*m, kLlama2Model);
  ASSERT_TRUE(v.ok());
  testing::TempDir dir;
  ASSERT_TRUE(vocab_only_gguf(*v, "llama2").write(dir.file("v.gguf")).ok());
  auto ours = GgufFile::open(dir.file("v.gguf"));
  ASSERT_TRUE(ours.ok()) << ours.error().message;
  auto ref = GgufFile::open(shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(ref.ok()) << ref.error().message;

  EXPECT_TRUE(ours->tensors().empty());
  EXPECT_EQ(*ours->get_string(n::kArchitecture), "llama");
  testing::expect_same_llama_vocab(*ours, *ref);
  EXPECT_EQ(*ours->get_bool(n::kTokAddBos), *ref->get_bool(n::kTokAddBos));
  EXPECT_EQ(*ours->get_bool(n::kTokAddEos), *ref->get_bool(n::kTokAddEos));
  EXPECT_TRUE(*ours->get_bool(n::kTokAddSpacePrefix));
  EXPECT_FALSE(ours->has(n::kTokPad));
}

TEST(SpmModel, HandBuiltMessage) {
  const std::string trainer = f_varint(3, 2) + f_varint(35, 1) + f_varint(40, 0) + f_varint(41, 1) +
                              f_varint(42, 2) + f_varint(43, 3) + f_len(2, "ignored") +
                              tag(99, 1) + std::string(8, 'x');  // unknown fixed64
  const std::string normalizer = f_len(1, "nmt_nfkc") + f_varint(3, 0) + f_varint(4, 0) + f_varint(5, 1);
  const std::string msg = unk_bos_eos() + piece("<pad>", -1.5f, 4) + piece("\xE2\x96\x81hi", -2.25f, 1) +
                          f_len(2, trainer) + f_len(3, normalizer) + f_len(5, normalizer) +
                          f_len(4, "self test data, skipped");
  auto m = parse(msg);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->pieces.size(), 5u);
  EXPECT_EQ(m->pieces[3].piece, "<pad>");
  EXPECT_EQ(m->pieces[3].score, -1.5f);
  EXPECT_EQ(m->pieces[3].type, SpmPieceType::kUserDefined);
  EXPECT_EQ(m->pieces[4].piece, "\xE2\x96\x81hi");
  EXPECT_EQ(m->model_type, SpmModelType::kBpe);
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->pad_id, 3);
  EXPECT_FALSE(m->add_dummy_prefix);
  EXPECT_FALSE(m->remove_extra_whitespaces);
  EXPECT_TRUE(m->escape_whitespaces);

  auto v = vocab_from_spm(*m, "test.model");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->pad_id, 3);
  EXPECT_EQ(v->add_space_prefix, std::optional<bool>(false));
  EXPECT_EQ(v->types, (std::vector<int32_t>{2, 3, 3, 4, 1}));
}

// Absent fields take the proto's defaults; a piece without a type is NORMAL;
// negative int32s arrive as 10-byte varints.
TEST(SpmModel, DefaultsAndNegativeIds) {
  auto m = parse(unk_bos_eos() + f_len(1, f_len(1, "a")) + f_len(2, f_varint(41, -1) + f_varint(43, -1)));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->pieces[3].type, SpmPieceType::kNormal);
  EXPECT_EQ(m->pieces[3].score, 0.0f);
  EXPECT_EQ(m->model_type, SpmModelType::kUnigram);
  EXPECT_EQ(m->bos_id, -1);
  EXPECT_EQ(m->pad_id, -1);
  EXPECT_TRUE(m->add_dummy_prefix);
  auto v = vocab_from_spm(*m, "x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->bos_id, -1);
}

TEST(SpmModel, UnsupportedModelTypeForGguf) {
  auto m = parse(unk_bos_eos() + f_len(2, f_varint(3, 3)));
  ASSERT_TRUE(m.ok());
  auto v = vocab_from_spm(*m, "word.model");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("WORD or CHAR"), std::string::npos);
}

TEST(SpmModel, MalformedMessagesAreErrors) {
  const std::string ok = unk_bos_eos();
  struct Case {
    std::string bytes;
    const char* expect;
  };
  const Case cases[] = {
      {"", "no pieces"},
      {ok + "\x0a", "truncated varint"},
      {ok + "\x0a\x80", "truncated varint"},
      {ok + "\x0a\x05" "ab", "past the end"},
      {ok + "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "past the end"},
      {ok + std::string(11, '\x80'), "longer than 10 bytes"},
      {ok + "\x0b", "wire type 3"},
      {ok + "\x0c", "wire type 4"},
      {ok + "\x07", "invalid field number 0"},
      {ok + "\x0d\x01\x02", "needs 4 bytes"},
      {ok + "\x09\x01", "needs 8 bytes"},
      {ok + f_varint(1, 5), "ModelProto.pieces (field 1)"},
      {ok + f_len(1, f_varint(1, 5)), "SentencePiece.piece"},
      {ok + f_len(1, f_varint(2, 5)), "SentencePiece.score"},
      {ok + piece("x", 0, 7), "unknown type 7"},
      {ok + piece("x", 0, 0), "unknown type 0"},
      {ok + f_len(1, f_len(1, "\xff\xfe")), "not valid UTF-8"},
      {ok + f_len(2, f_varint(3, 9)), "model_type 9"},
      {ok + f_len(2, f_varint(40, 1LL << 40)), "does not fit int32"},
      {ok + f_len(2, f_varint(41, 3)), "bos_id = 3 is outside the 3 pieces"},
      {ok + f_len(2, f_varint(43, -2)), "pad_id = -2"},
      {ok + f_len(2, f_len(35, "x")), "byte_fallback"},
      {ok + f_len(3, "\x18"), "truncated varint"},
      {piece("<s>", 0, 3) + piece("</s>", 0, 3) + piece("x", 0, 1), "does not name a piece of type UNKNOWN"},
      {ok + f_len(2, f_varint(40, -1)), "does not name a piece of type UNKNOWN"},
  };
  for (const Case& c : cases) {
    const std::string e = parse_error(c.bytes);
    EXPECT_NE(e.find(c.expect), std::string::npos) << "want '" << c.expect << "', got: " << e;
    EXPECT_NE(e.find("test.model"), std::string::npos) << e;
  }
}

// An error offset counts from the start of the file, also inside nested messages.
TEST(SpmModel, ErrorOffsetsAreFileOffsets) {
  const std::string ok = unk_bos_eos();
  const std::string e = parse_error(ok + f_len(2, f_varint(3, 2) + "\x18"));
  const size_t at = ok.size() + 2 + 2 + 1;  // outer tag+len, model_type field, the bad field's tag
  EXPECT_NE(e.find("offset " + std::to_string(at)), std::string::npos) << e;
}

TEST(SpmModel, TruncatedRealModelIsAnError) {
  const std::string full = testing::read_file(shared_path(kLlama2Model));
  ASSERT_GT(full.size(), 100000u);
  // Protobuf has no overall length: a cut on a field boundary is a valid,
  // shorter model. Any other cut is an error; none may pass for the whole.
  int errors = 0;
  for (size_t cut : {size_t{1}, size_t{2}, size_t{5}, size_t{1000}, size_t{77777}, full.size() / 2,
                     full.size() - 300, full.size() - 100, full.size() - 1}) {
    auto m = parse(full.substr(0, cut));
    if (m.ok())
      EXPECT_LT(m->pieces.size(), 32000u) << cut;
    else
      ++errors;
  }
  EXPECT_GE(errors, 7);
}

TEST(SpmModel, RandomBytesAreErrors) {
  std::mt19937 rng(42);
  for (int i = 0; i < 500; ++i) {
    std::string b(rng() % 300, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    // Half the inputs start like a real model (a piece field), to get deeper.
    if (i % 2 && b.size() > 2) b[0] = '\x0a';
    EXPECT_FALSE(parse(b).ok()) << i;
  }
  // Random mutations of a real model: either parses or errors; never crashes.
  std::string full = testing::read_file(shared_path(kLlama2Model));
  for (int i = 0; i < 50; ++i) {
    std::string b = full;
    for (int k = 0; k < 8; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    (void)parse(b);
  }
}

}  // namespace
}  // namespace duet
