#include "formats/spm_model.h"

#include <cstring>

#include "core/mapped_file.h"

namespace duet {
namespace {

// Field numbers from sentencepiece_model.proto.
namespace field {
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr uint32_t kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kTrainerModelType = 3, kTrainerByteFallback = 35, kTrainerUnkId = 40,
                   kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43;
constexpr uint32_t kNormAddDummyPrefix = 3, kNormRemoveExtraWhitespaces = 4,
                   kNormEscapeWhitespaces = 5;
}  // namespace field

enum class WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  WireType wire = WireType::kVarint;
  uint64_t varint = 0;      // kVarint
  uint32_t fixed32 = 0;     // kFixed32
  std::string_view bytes;   // kLen
  size_t offset = 0;        // of the tag, from the start of the file
};

// Reads the fields of one message. Offsets in errors count from the start of
// the whole file so a corrupt byte can be found with a hex dump.
class WireReader {
 public:
  WireReader(std::string_view buf, size_t base, const std::string& name)
      : buf_(buf), base_(base), name_(name) {}

  bool done() const { return pos_ >= buf_.size(); }
  size_t offset_of(std::string_view inner) const { return base_ + static_cast<size_t>(inner.data() - buf_.data()); }

  Result<Field> next() {
    Field f;
    f.offset = base_ + pos_;
    DUET_ASSIGN(const uint64_t tag, varint());
    f.number = static_cast<uint32_t>(tag >> 3);
    if (f.number == 0 || (tag >> 3) > 0x1fffffff)
      return err(name_, ": protobuf: invalid field number ", tag >> 3, " at offset ", f.offset);
    const uint32_t wire = static_cast<uint32_t>(tag & 7);
    switch (wire) {
      case 0: {
        f.wire = WireType::kVarint;
        DUET_ASSIGN(f.varint, varint());
        return f;
      }
      case 1:
        f.wire = WireType::kFixed64;
        DUET_TRY(take(8, f.offset));
        return f;
      case 2: {
        f.wire = WireType::kLen;
        DUET_ASSIGN(const uint64_t len, varint());
        if (len > buf_.size() - pos_)
          return err(name_, ": protobuf: field ", f.number, " at offset ", f.offset, " has length ", len,
                     ", past the end of its message (", buf_.size() - pos_, " bytes left)");
        f.bytes = buf_.substr(pos_, static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return f;
      }
      case 5:
        f.wire = WireType::kFixed32;
        DUET_TRY(take(4, f.offset));
        std::memcpy(&f.fixed32, buf_.data() + pos_ - 4, 4);
        return f;
      default:
        return err(name_, ": protobuf: unsupported wire type ", wire, " (field ", f.number,
                   ") at offset ", f.offset);
    }
  }

 private:
  Result<uint64_t> varint() {
    const size_t start = base_ + pos_;
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= buf_.size())
        return err(name_, ": protobuf: truncated varint at offset ", start);
      const uint8_t b = static_cast<uint8_t>(buf_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) return v;
    }
    return err(name_, ": protobuf: varint longer than 10 bytes at offset ", start);
  }

  Status take(size_t n, size_t field_offset) {
    if (buf_.size() - pos_ < n)
      return err(name_, ": protobuf: fixed-width field at offset ", field_offset, " needs ", n,
                 " bytes, ", buf_.size() - pos_, " left");
    pos_ += n;
    return {};
  }

  std::string_view buf_;
  size_t base_;
  const std::string& name_;
  size_t pos_ = 0;
};

Status expect_wire(const Field& f, WireType want, const char* what, const std::string& name) {
  if (f.wire != want)
    return err(name, ": protobuf: ", what, " (field ", f.number, ") at offset ", f.offset,
               " has wire type ", static_cast<uint32_t>(f.wire), ", expected ",
               static_cast<uint32_t>(want));
  return {};
}

// An int32 proto field: negative values arrive sign-extended to 64 bits.
Result<int32_t> as_int32(const Field& f, const char* what, const std::string& name) {
  DUET_TRY(expect_wire(f, WireType::kVarint, what, name));
  const auto v = static_cast<int64_t>(f.varint);
  if (v < INT32_MIN || v > INT32_MAX)
    return err(name, ": protobuf: ", what, " = ", v, " at offset ", f.offset, " does not fit int32");
  return static_cast<int32_t>(v);
}

Result<bool> as_bool(const Field& f, const char* what, const std::string& name) {
  DUET_TRY(expect_wire(f, WireType::kVarint, what, name));
  return f.varint != 0;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<uint8_t>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

Result<SpmPiece> parse_piece(const WireReader& outer, std::string_view msg, size_t index,
                             const std::string& name) {
  WireReader r(msg, outer.offset_of(msg), name);
  SpmPiece p;
  while (!r.done()) {
    DUET_ASSIGN(const Field f, r.next());
    switch (f.number) {
      case field::kPiecePiece:
        DUET_TRY(expect_wire(f, WireType::kLen, "SentencePiece.piece", name));
        if (!valid_utf8(f.bytes))
          return err(name, ": piece ", index, " at offset ", f.offset, " is not valid UTF-8");
        p.piece = std::string(f.bytes);
        break;
      case field::kPieceScore:
        DUET_TRY(expect_wire(f, WireType::kFixed32, "SentencePiece.score", name));
        std::memcpy(&p.score, &f.fixed32, 4);
        break;
      case field::kPieceType: {
        DUET_ASSIGN(const int32_t t, as_int32(f, "SentencePiece.type", name));
        if (t < 1 || t > 6)
          return err(name, ": piece ", index, " has unknown type ", t, " at offset ", f.offset);
        p.type = static_cast<SpmPieceType>(t);
        break;
      }
      default:
        break;
    }
  }
  return p;
}

Status parse_trainer_spec(const WireReader& outer, std::string_view msg, SpmModel& m,
                          const std::string& name) {
  WireReader r(msg, outer.offset_of(msg), name);
  while (!r.done()) {
    DUET_ASSIGN(const Field f, r.next());
    switch (f.number) {
      case field::kTrainerModelType: {
        DUET_ASSIGN(const int32_t t, as_int32(f, "TrainerSpec.model_type", name));
        if (t < 1 || t > 4) return err(name, ": unknown TrainerSpec.model_type ", t, " at offset ", f.offset);
        m.model_type = static_cast<SpmModelType>(t);
        break;
      }
      case field::kTrainerByteFallback: {
        DUET_ASSIGN(m.byte_fallback, as_bool(f, "TrainerSpec.byte_fallback", name));
        break;
      }
      case field::kTrainerUnkId: {
        DUET_ASSIGN(m.unk_id, as_int32(f, "TrainerSpec.unk_id", name));
        break;
      }
      case field::kTrainerBosId: {
        DUET_ASSIGN(m.bos_id, as_int32(f, "TrainerSpec.bos_id", name));
        break;
      }
      case field::kTrainerEosId: {
        DUET_ASSIGN(m.eos_id, as_int32(f, "TrainerSpec.eos_id", name));
        break;
      }
      case field::kTrainerPadId: {
        DUET_ASSIGN(m.pad_id, as_int32(f, "TrainerSpec.pad_id", name));
        break;
      }
      default:
        break;
    }
  }
  return {};
}

Status parse_normalizer_spec(const WireReader& outer, std::string_view msg, SpmModel& m,
                             const std::string& name) {
  WireReader r(msg, outer.offset_of(msg), name);
  while (!r.done()) {
    DUET_ASSIGN(const Field f, r.next());
    switch (f.number) {
      case field::kNormAddDummyPrefix: {
        DUET_ASSIGN(m.add_dummy_prefix, as_bool(f, "NormalizerSpec.add_dummy_prefix", name));
        break;
      }
      case field::kNormRemoveExtraWhitespaces: {
        DUET_ASSIGN(m.remove_extra_whitespaces, as_bool(f, "NormalizerSpec.remove_extra_whitespaces", name));
        break;
      }
      case field::kNormEscapeWhitespaces: {
        DUET_ASSIGN(m.escape_whitespaces, as_bool(f, "NormalizerSpec.escape_whitespaces", name));
        break;
      }
      default:
        break;
    }
  }
  return {};
}

// A special id must name a piece (or be -1 where the proto allows "none").
Status check_id(int32_t id, const char* what, const SpmModel& m, const std::string& name) {
  if (id < -1 || id >= static_cast<int32_t>(m.pieces.size()))
    return err(name, ": TrainerSpec.", what, " = ", id, " is outside the ", m.pieces.size(), " pieces");
  return {};
}

}  // namespace

Result<SpmModel> parse_spm_model(std::string_view bytes, const std::string& name) {
  SpmModel m;
  WireReader r(bytes, 0, name);
  while (!r.done()) {
    DUET_ASSIGN(const Field f, r.next());
    switch (f.number) {
      case field::kModelPieces: {
        DUET_TRY(expect_wire(f, WireType::kLen, "ModelProto.pieces", name));
        DUET_ASSIGN(SpmPiece p, parse_piece(r, f.bytes, m.pieces.size(), name));
        m.pieces.push_back(std::move(p));
        break;
      }
      case field::kModelTrainerSpec:
        DUET_TRY(expect_wire(f, WireType::kLen, "ModelProto.trainer_spec", name));
        DUET_TRY(parse_trainer_spec(r, f.bytes, m, name));
        break;
      case field::kModelNormalizerSpec:
        DUET_TRY(expect_wire(f, WireType::kLen, "ModelProto.normalizer_spec", name));
        DUET_TRY(parse_normalizer_spec(r, f.bytes, m, name));
        break;
      default:
        break;
    }
  }
  if (m.pieces.empty()) return err(name, ": SentencePiece model has no pieces");
  DUET_TRY(check_id(m.unk_id, "unk_id", m, name));
  DUET_TRY(check_id(m.bos_id, "bos_id", m, name));
  DUET_TRY(check_id(m.eos_id, "eos_id", m, name));
  DUET_TRY(check_id(m.pad_id, "pad_id", m, name));
  // SentencePiece itself refuses a model without its unknown piece.
  if (m.unk_id < 0 || m.pieces[static_cast<size_t>(m.unk_id)].type != SpmPieceType::kUnknown)
    return err(name, ": SentencePiece model: unk_id ", m.unk_id, " does not name a piece of type UNKNOWN");
  return m;
}

Result<SpmModel> read_spm_model(const std::string& path) {
  DUET_ASSIGN(MappedFile file, MappedFile::open(path));
  const std::string_view bytes(reinterpret_cast<const char*>(file.data()), file.size());
  return parse_spm_model(bytes, path);
}

}  // namespace duet
