#include "formats/spm_model.h"

#include <cstring>
#include <functional>
#include <type_traits>

#include "core/mapped_file.h"
#include "core/utf8.h"

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

// Calls fn(field) for each field of msg, a message nested in outer's buffer.
Status for_each_field(const WireReader& outer, std::string_view msg, const std::string& name,
                      const std::function<Status(const Field&)>& fn) {
  WireReader r(msg, outer.offset_of(msg), name);
  while (!r.done()) {
    DUET_ASSIGN(const Field f, r.next());
    DUET_TRY(fn(f));
  }
  return {};
}

Result<SpmPiece> parse_piece(const WireReader& outer, std::string_view msg, size_t index,
                             const std::string& name) {
  SpmPiece p;
  DUET_TRY(for_each_field(outer, msg, name, [&](const Field& f) -> Status {
    switch (f.number) {
      case field::kPiecePiece:
        DUET_TRY(expect_wire(f, WireType::kLen, "SentencePiece.piece", name));
        if (!utf8::is_valid(f.bytes))
          return err(name, ": piece ", index, " at offset ", f.offset, " is not valid UTF-8");
        p.piece = std::string(f.bytes);
        return {};
      case field::kPieceScore:
        DUET_TRY(expect_wire(f, WireType::kFixed32, "SentencePiece.score", name));
        std::memcpy(&p.score, &f.fixed32, 4);
        return {};
      case field::kPieceType: {
        DUET_ASSIGN(const int32_t t, as_int32(f, "SentencePiece.type", name));
        if (t < 1 || t > 6)
          return err(name, ": piece ", index, " has unknown type ", t, " at offset ", f.offset);
        p.type = static_cast<SpmPieceType>(t);
        return {};
      }
      default:
        return {};
    }
  }));
  return p;
}

// A scalar field of a spec message and the SpmModel member it fills.
template <class T>
struct ScalarField {
  uint32_t number;
  const char* what;
  T SpmModel::*member;
};

constexpr ScalarField<int32_t> kTrainerIds[] = {
    {field::kTrainerUnkId, "TrainerSpec.unk_id", &SpmModel::unk_id},
    {field::kTrainerBosId, "TrainerSpec.bos_id", &SpmModel::bos_id},
    {field::kTrainerEosId, "TrainerSpec.eos_id", &SpmModel::eos_id},
    {field::kTrainerPadId, "TrainerSpec.pad_id", &SpmModel::pad_id},
};
constexpr ScalarField<bool> kTrainerFlags[] = {
    {field::kTrainerByteFallback, "TrainerSpec.byte_fallback", &SpmModel::byte_fallback},
};
constexpr ScalarField<bool> kNormalizerFlags[] = {
    {field::kNormAddDummyPrefix, "NormalizerSpec.add_dummy_prefix", &SpmModel::add_dummy_prefix},
    {field::kNormRemoveExtraWhitespaces, "NormalizerSpec.remove_extra_whitespaces",
     &SpmModel::remove_extra_whitespaces},
    {field::kNormEscapeWhitespaces, "NormalizerSpec.escape_whitespaces", &SpmModel::escape_whitespaces},
};

// Fills the member that f is, when f is one of `known`; other fields are skipped.
template <class T, size_t N>
Status read_scalar(const Field& f, const ScalarField<T> (&known)[N], SpmModel& m, const std::string& name) {
  for (const ScalarField<T>& k : known) {
    if (k.number != f.number) continue;
    if constexpr (std::is_same_v<T, bool>) {
      DUET_ASSIGN(m.*k.member, as_bool(f, k.what, name));
    } else {
      DUET_ASSIGN(m.*k.member, as_int32(f, k.what, name));
    }
  }
  return {};
}

Status parse_trainer_spec(const WireReader& outer, std::string_view msg, SpmModel& m,
                          const std::string& name) {
  return for_each_field(outer, msg, name, [&](const Field& f) -> Status {
    if (f.number == field::kTrainerModelType) {
      DUET_ASSIGN(const int32_t t, as_int32(f, "TrainerSpec.model_type", name));
      if (t < 1 || t > 4) return err(name, ": unknown TrainerSpec.model_type ", t, " at offset ", f.offset);
      m.model_type = static_cast<SpmModelType>(t);
    }
    DUET_TRY(read_scalar(f, kTrainerIds, m, name));
    return read_scalar(f, kTrainerFlags, m, name);
  });
}

Status parse_normalizer_spec(const WireReader& outer, std::string_view msg, SpmModel& m,
                             const std::string& name) {
  return for_each_field(outer, msg, name,
                        [&](const Field& f) { return read_scalar(f, kNormalizerFlags, m, name); });
}

// A special id must name a piece (or be -1 where the proto allows "none").
Status check_id(int32_t id, const char* what, const SpmModel& m, const std::string& name) {
  if (id < -1 || id >= static_cast<int32_t>(m.pieces.size()))
    return err(name, ": ", what, " = ", id, " is outside the ", m.pieces.size(), " pieces");
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
  for (const ScalarField<int32_t>& id : kTrainerIds) DUET_TRY(check_id(m.*id.member, id.what, m, name));
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
