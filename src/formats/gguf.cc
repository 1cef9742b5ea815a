// GGUF reader. Every count, length and offset in the file is untrusted: each is
// checked against the bytes that remain before anything is allocated or read.
#include "formats/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "formats/checked_math.h"

namespace duet {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "u8";
    case GgufType::INT8: return "i8";
    case GgufType::UINT16: return "u16";
    case GgufType::INT16: return "i16";
    case GgufType::UINT32: return "u32";
    case GgufType::INT32: return "i32";
    case GgufType::FLOAT32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "u64";
    case GgufType::INT64: return "i64";
    case GgufType::FLOAT64: return "f64";
  }
  return "unknown";
}

// ---- GgufValue -------------------------------------------------------------

bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_integer() const { return is_integer_type(type); }

bool GgufValue::is_signed() const {
  return type == GgufType::INT8 || type == GgufType::INT16 || type == GgufType::INT32 ||
         type == GgufType::INT64;
}

namespace {

GgufValue unsigned_value(GgufType t, uint64_t v) {
  GgufValue g;
  g.type = t;
  g.u64 = v;
  g.i64 = v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? 0 : static_cast<int64_t>(v);
  return g;
}

GgufValue signed_value(GgufType t, int64_t v) {
  GgufValue g;
  g.type = t;
  g.i64 = v;
  g.u64 = v < 0 ? 0 : static_cast<uint64_t>(v);
  return g;
}

GgufValue float_value(GgufType t, double v) {
  GgufValue g;
  g.type = t;
  g.f64 = v;
  return g;
}

}  // namespace

GgufValue GgufValue::of_u8(uint8_t v) { return unsigned_value(GgufType::UINT8, v); }
GgufValue GgufValue::of_i8(int8_t v) { return signed_value(GgufType::INT8, v); }
GgufValue GgufValue::of_u16(uint16_t v) { return unsigned_value(GgufType::UINT16, v); }
GgufValue GgufValue::of_i16(int16_t v) { return signed_value(GgufType::INT16, v); }
GgufValue GgufValue::of_u32(uint32_t v) { return unsigned_value(GgufType::UINT32, v); }
GgufValue GgufValue::of_i32(int32_t v) { return signed_value(GgufType::INT32, v); }
GgufValue GgufValue::of_u64(uint64_t v) { return unsigned_value(GgufType::UINT64, v); }
GgufValue GgufValue::of_i64(int64_t v) { return signed_value(GgufType::INT64, v); }
GgufValue GgufValue::of_f32(float v) { return float_value(GgufType::FLOAT32, v); }
GgufValue GgufValue::of_f64(double v) { return float_value(GgufType::FLOAT64, v); }

GgufValue GgufValue::of_bool(bool v) {
  GgufValue g;
  g.type = GgufType::BOOL;
  g.b = v;
  g.u64 = v;
  g.i64 = v;
  return g;
}

GgufValue GgufValue::of_string(std::string v) {
  GgufValue g;
  g.type = GgufType::STRING;
  g.str = std::move(v);
  return g;
}

GgufValue GgufValue::of_array(GgufType elem_type, std::vector<GgufValue> items) {
  GgufValue g;
  g.type = GgufType::ARRAY;
  g.elem_type = elem_type;
  g.items = std::move(items);
  return g;
}

GgufValue GgufValue::of_strings(std::vector<std::string> v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (auto& s : v) items.push_back(of_string(std::move(s)));
  return of_array(GgufType::STRING, std::move(items));
}

GgufValue GgufValue::of_f32s(const std::vector<float>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (float f : v) items.push_back(of_f32(f));
  return of_array(GgufType::FLOAT32, std::move(items));
}

GgufValue GgufValue::of_i32s(const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (int32_t i : v) items.push_back(of_i32(i));
  return of_array(GgufType::INT32, std::move(items));
}

// ---- Reader ----------------------------------------------------------------

namespace {

// Each metadata item costs sizeof(GgufValue) in memory, far more than its
// bytes on disk, so their total is capped (the largest real vocabularies
// hold a few hundred thousand tokens and merges).
constexpr uint64_t kMaxMetadataItems = uint64_t{1} << 24;
constexpr uint32_t kMaxAlignment = uint32_t{1} << 30;

// Smallest encoding of one value of a type, to bound counts by the bytes left.
uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: return 8;   // length
    case GgufType::ARRAY: return 12;   // element type + count
  }
  return 1;
}

bool known_type(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufType::FLOAT64); }

}  // namespace

class GgufReader {
 public:
  explicit GgufReader(GgufFile& f) : f_(f), data_(f.file_.data()), size_(f.file_.size()) {}

  Status read() {
    DUET_TRY(read_header());
    DUET_TRY(read_metadata());
    DUET_TRY(read_alignment());
    DUET_TRY(read_tensor_infos());
    return place_tensors();
  }

 private:
  template <class... Parts>
  Error fail_at(size_t offset, const Parts&... parts) const {
    return err(f_.path(), ": offset ", offset, ": ", parts...);
  }
  template <class... Parts>
  Error fail(const Parts&... parts) const {
    return err(f_.path(), ": ", parts...);
  }

  size_t remaining() const { return size_ - pos_; }

  Status need(uint64_t n, const char* what) const {
    if (n > remaining())
      return fail_at(pos_, "truncated: ", what, " needs ", n, " bytes but only ", remaining(),
                     " remain");
    return {};
  }

  template <class T>
  Result<T> read_pod(const char* what) {
    DUET_TRY(need(sizeof(T), what));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // the host is little-endian like the file
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(const char* what) {
    const size_t at = pos_;
    DUET_ASSIGN(uint64_t len, read_pod<uint64_t>(what));
    if (len > remaining())
      return fail_at(at, what, ": string length ", len, " exceeds the ", remaining(),
                     " bytes left in the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  Status read_header() {
    if (size_ < 4) return fail("not a GGUF file: only ", size_, " bytes");
    if (std::memcmp(data_, "GGUF", 4) != 0)
      return fail("not a GGUF file: bad magic (expected 'GGUF' at offset 0)");
    pos_ = 4;
    DUET_ASSIGN(uint32_t version, read_pod<uint32_t>("version"));
    if (version == 1) return fail("GGUF version 1 is not supported (only versions 2 and 3)");
    if (version != 2 && version != 3)
      return fail("unsupported GGUF version ", version, " (only versions 2 and 3)");
    f_.version_ = version;

    size_t at = pos_;
    DUET_ASSIGN(tensor_count_, read_pod<uint64_t>("tensor count"));
    DUET_ASSIGN(uint64_t kv_count, read_pod<uint64_t>("metadata count"));
    kv_count_ = kv_count;
    // A tensor info is at least name length, n_dims, one dim, type, offset.
    constexpr uint64_t kMinTensorInfo = 8 + 4 + 8 + 4 + 8;
    if (tensor_count_ > remaining() / kMinTensorInfo)
      return fail_at(at, "tensor count ", tensor_count_, " cannot fit in the ", remaining(),
                     " bytes left in the file");
    at += 8;
    // A key-value pair is at least key length, key byte, type, one value byte.
    constexpr uint64_t kMinKv = 8 + 1 + 4 + 1;
    if (kv_count_ > remaining() / kMinKv)
      return fail_at(at, "metadata count ", kv_count_, " cannot fit in the ", remaining(),
                     " bytes left in the file");
    return {};
  }

  Result<GgufValue> read_value(GgufType type, const std::string& key, int depth) {
    const size_t at = pos_;
    switch (type) {
      case GgufType::UINT8: { DUET_ASSIGN(auto v, read_pod<uint8_t>("u8 value")); return GgufValue::of_u8(v); }
      case GgufType::INT8: { DUET_ASSIGN(auto v, read_pod<int8_t>("i8 value")); return GgufValue::of_i8(v); }
      case GgufType::UINT16: { DUET_ASSIGN(auto v, read_pod<uint16_t>("u16 value")); return GgufValue::of_u16(v); }
      case GgufType::INT16: { DUET_ASSIGN(auto v, read_pod<int16_t>("i16 value")); return GgufValue::of_i16(v); }
      case GgufType::UINT32: { DUET_ASSIGN(auto v, read_pod<uint32_t>("u32 value")); return GgufValue::of_u32(v); }
      case GgufType::INT32: { DUET_ASSIGN(auto v, read_pod<int32_t>("i32 value")); return GgufValue::of_i32(v); }
      case GgufType::UINT64: { DUET_ASSIGN(auto v, read_pod<uint64_t>("u64 value")); return GgufValue::of_u64(v); }
      case GgufType::INT64: { DUET_ASSIGN(auto v, read_pod<int64_t>("i64 value")); return GgufValue::of_i64(v); }
      case GgufType::FLOAT32: { DUET_ASSIGN(auto v, read_pod<float>("f32 value")); return GgufValue::of_f32(v); }
      case GgufType::FLOAT64: { DUET_ASSIGN(auto v, read_pod<double>("f64 value")); return GgufValue::of_f64(v); }
      case GgufType::BOOL: {
        DUET_ASSIGN(auto v, read_pod<uint8_t>("bool value"));
        if (v > 1) return fail_at(at, "key '", key, "': bool value ", int{v}, " is not 0 or 1");
        return GgufValue::of_bool(v == 1);
      }
      case GgufType::STRING: {
        DUET_ASSIGN(std::string s, read_string("string value"));
        return GgufValue::of_string(std::move(s));
      }
      case GgufType::ARRAY: return read_array(key, depth + 1);
    }
    return fail_at(at, "key '", key, "': unknown value type");
  }

  Result<GgufValue> read_array(const std::string& key, int depth) {
    if (depth > kGgufMaxArrayDepth)
      return fail_at(pos_, "key '", key, "': arrays nested deeper than ", kGgufMaxArrayDepth);
    const size_t at = pos_;
    DUET_ASSIGN(uint32_t raw, read_pod<uint32_t>("array element type"));
    if (!known_type(raw))
      return fail_at(at, "key '", key, "': unknown array element type ", raw);
    const auto elem = static_cast<GgufType>(raw);
    const size_t count_at = pos_;
    DUET_ASSIGN(uint64_t count, read_pod<uint64_t>("array count"));
    if (count > remaining() / min_encoded_size(elem))
      return fail_at(count_at, "key '", key, "': array count ", count, " of ",
                     gguf_type_name(elem), " cannot fit in the ", remaining(),
                     " bytes left in the file");
    if (count > kMaxMetadataItems - items_)
      return fail_at(count_at, "key '", key, "': array count ", count,
                     " exceeds the limit of ", kMaxMetadataItems, " metadata items in a file");
    items_ += count;
    std::vector<GgufValue> items;
    items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      DUET_ASSIGN(GgufValue v, read_value(elem, key, depth));
      items.push_back(std::move(v));
    }
    return GgufValue::of_array(elem, std::move(items));
  }

  Status read_metadata() {
    for (uint64_t i = 0; i < kv_count_; ++i) {
      const size_t key_at = pos_;
      DUET_ASSIGN(std::string key, read_string("metadata key"));
      if (key.empty()) return fail_at(key_at, "metadata key ", i, " is empty");
      if (f_.kv_.count(key)) return fail_at(key_at, "duplicate metadata key '", key, "'");
      const size_t type_at = pos_;
      DUET_ASSIGN(uint32_t raw, read_pod<uint32_t>("metadata value type"));
      if (!known_type(raw))
        return fail_at(type_at, "key '", key, "': unknown value type ", raw);
      DUET_ASSIGN(GgufValue v, read_value(static_cast<GgufType>(raw), key, 0));
      f_.key_order_.push_back(key);
      f_.kv_.emplace(std::move(key), std::move(v));
    }
    return {};
  }

  Status read_alignment() {
    const GgufValue* a = f_.find("general.alignment");
    if (!a) return {};
    if (!a->is_integer() || (a->is_signed() && a->i64 < 0))
      return fail("general.alignment has type ", gguf_type_name(a->type),
                  "; expected a non-negative integer");
    if (a->u64 == 0 || a->u64 > kMaxAlignment || (a->u64 & (a->u64 - 1)) != 0)
      return fail("general.alignment ", a->u64, " is not a power of two between 1 and ",
                  kMaxAlignment);
    f_.alignment_ = static_cast<size_t>(a->u64);
    return {};
  }

  struct Placement {
    uint64_t offset;  // relative to the data section
    size_t index;
  };

  Status read_tensor_infos() {
    f_.tensors_.reserve(static_cast<size_t>(tensor_count_));
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      const size_t name_at = pos_;
      DUET_ASSIGN(std::string name, read_string("tensor name"));
      if (f_.tensor_index_.count(name))
        return fail_at(name_at, "duplicate tensor name '", name, "'");
      const size_t dims_at = pos_;
      DUET_ASSIGN(uint32_t n_dims, read_pod<uint32_t>("tensor n_dims"));
      if (n_dims < 1 || n_dims > 4)
        return fail_at(dims_at, "tensor '", name, "': n_dims ", n_dims, " is not in 1..4");
      TensorView t;
      t.name = name;
      t.n_dims = static_cast<int>(n_dims);
      for (uint32_t d = 0; d < n_dims; ++d) {
        const size_t ne_at = pos_;
        DUET_ASSIGN(uint64_t ne, read_pod<uint64_t>("tensor dimension"));
        if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return fail_at(ne_at, "tensor '", name, "': dimension ", d, " is ", ne,
                         " (must be positive)");
        t.ne[d] = static_cast<int64_t>(ne);
      }
      const size_t type_at = pos_;
      DUET_ASSIGN(uint32_t raw, read_pod<uint32_t>("tensor type"));
      if (!dtype_traits(raw))
        return fail_at(type_at, "tensor '", name, "': unknown ggml type ", raw);
      t.dtype = static_cast<DType>(raw);
      DUET_ASSIGN(t.nbytes, tensor_bytes(t, dims_at));
      const size_t off_at = pos_;
      DUET_ASSIGN(uint64_t offset, read_pod<uint64_t>("tensor offset"));
      if (offset % f_.alignment_ != 0)
        return fail_at(off_at, "tensor '", name, "': data offset ", offset,
                       " is not a multiple of the alignment ", f_.alignment_);
      placements_.push_back({offset, f_.tensors_.size()});
      f_.tensor_index_.emplace(name, f_.tensors_.size());
      f_.tensors_.push_back(std::move(t));
    }
    return {};
  }

  Result<size_t> tensor_bytes(const TensorView& t, size_t at) const {
    auto row = row_bytes(t.dtype, t.ne[0]);
    if (!row.ok()) return fail_at(at, "tensor '", t.name, "': ", row.error().message);
    // row_bytes itself does not check its multiply; redo it checked.
    const DTypeTraits& tr = traits(t.dtype);
    uint64_t total = 0;
    bool fits = checked_mul(static_cast<uint64_t>(t.ne[0] / tr.block_elems),
                            static_cast<uint64_t>(tr.block_bytes), &total);
    for (int d = 1; d < 4; ++d) {
      if (!fits || !checked_mul(total, static_cast<uint64_t>(t.ne[d]), &total) ||
          total > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail_at(at, "tensor '", t.name, "': shape ", t.ne[0], " x ", t.ne[1], " x ",
                       t.ne[2], " x ", t.ne[3], " overflows when multiplied");
    }
    // Elements must be countable too (TensorView::elements multiplies them).
    uint64_t elems = 1;
    for (int d = 0; d < 4; ++d)
      if (!checked_mul(elems, static_cast<uint64_t>(t.ne[d]), &elems) ||
          elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail_at(at, "tensor '", t.name, "': element count overflows");
    return static_cast<size_t>(total);
  }

  Status place_tensors() {
    uint64_t data_start = 0;
    if (!align_up(pos_, f_.alignment_, &data_start))
      return fail_at(pos_, "data section start overflows");
    if (f_.tensors_.empty()) {
      // A metadata-only file (a vocabulary) need not be padded to a data section.
      f_.data_offset_ = static_cast<size_t>(std::min<uint64_t>(data_start, size_));
      return {};
    }
    if (data_start > size_)
      return fail_at(pos_, "truncated: data section would start at ", data_start,
                     " but the file has ", size_, " bytes");
    f_.data_offset_ = static_cast<size_t>(data_start);
    const uint64_t data_size = size_ - data_start;

    std::sort(placements_.begin(), placements_.end(),
              [](const Placement& a, const Placement& b) { return a.offset < b.offset; });
    uint64_t prev_end = 0;
    const TensorView* prev = nullptr;
    for (const Placement& p : placements_) {
      TensorView& t = f_.tensors_[p.index];
      uint64_t end = 0;
      if (!checked_add(p.offset, t.nbytes, &end) || end > data_size)
        return fail("tensor '", t.name, "': data [", p.offset, ", +", t.nbytes,
                    ") relative to the data section at ", data_start,
                    " runs past the end of the file (", size_, " bytes)");
      if (prev && p.offset < prev_end)
        return fail("tensor '", t.name, "' at data offset ", p.offset, " overlaps tensor '",
                    prev->name, "' which ends at ", prev_end);
      t.data = data_ + data_start + p.offset;
      prev_end = end;
      prev = &t;
    }
    return {};
  }

  GgufFile& f_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t items_ = 0;
  std::vector<Placement> placements_;
};

Result<GgufFile> GgufFile::open(const std::string& path, LoadMode mode) {
  DUET_ASSIGN(MappedFile mapped, MappedFile::open(path, mode));
  GgufFile f;
  f.file_ = std::move(mapped);
  f.path_ = path;
  DUET_TRY(GgufReader(f).read());
  return f;
}

Result<GgufFile> GgufFile::assemble(std::string path,
                                    std::vector<std::pair<std::string, GgufValue>> kv,
                                    std::vector<TensorView> tensors,
                                    std::shared_ptr<const void> backing) {
  GgufFile f;
  f.path_ = std::move(path);
  f.version_ = 3;
  for (auto& [key, value] : kv) {
    if (!f.kv_.emplace(key, std::move(value)).second)
      return err(f.path_, ": duplicate metadata key '", key, "'");
    f.key_order_.push_back(key);
  }
  for (TensorView& t : tensors) {
    if (!f.tensor_index_.emplace(t.name, f.tensors_.size()).second)
      return err(f.path_, ": duplicate tensor '", t.name, "'");
    f.tensors_.push_back(std::move(t));
  }
  f.backing_ = std::move(backing);
  return f;
}

// ---- Lookups ---------------------------------------------------------------

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorView* GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Error wrong_type(const std::string& path, const std::string& key, const GgufValue& v,
                 const char* expected) {
  if (v.type == GgufType::ARRAY)
    return err(path, ": key '", key, "' is an array of ", gguf_type_name(v.elem_type),
               "; expected ", expected);
  return err(path, ": key '", key, "' has type ", gguf_type_name(v.type), "; expected ",
             expected);
}

}  // namespace

#define DUET_FIND_OR_FAIL(v, key)                                      \
  const GgufValue* v = find(key);                                      \
  if (!v) return err(path(), ": missing metadata key '", key, "'")

Result<uint64_t> GgufFile::get_uint(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (!v->is_integer()) return wrong_type(path(), key, *v, "an integer");
  if (v->is_signed() && v->i64 < 0)
    return err(path(), ": key '", key, "' is ", v->i64, "; expected a non-negative integer");
  return v->u64;
}

Result<double> GgufFile::get_float(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (v->is_float()) return v->f64;
  if (v->is_integer())
    return v->is_signed() ? static_cast<double>(v->i64) : static_cast<double>(v->u64);
  return wrong_type(path(), key, *v, "a number");
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (v->type != GgufType::STRING) return wrong_type(path(), key, *v, "a string");
  return v->str;
}

Result<bool> GgufFile::get_bool(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (v->type != GgufType::BOOL) return wrong_type(path(), key, *v, "a bool");
  return v->b;
}

Result<std::vector<std::string>> GgufFile::get_strings(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (v->type != GgufType::ARRAY || v->elem_type != GgufType::STRING)
    return wrong_type(path(), key, *v, "an array of string");
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) out.push_back(item.str);
  return out;
}

Result<std::vector<float>> GgufFile::get_floats(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (v->type != GgufType::ARRAY ||
      (v->elem_type != GgufType::FLOAT32 && v->elem_type != GgufType::FLOAT64))
    return wrong_type(path(), key, *v, "an array of f32");
  std::vector<float> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) out.push_back(static_cast<float>(item.f64));
  return out;
}

Result<std::vector<int32_t>> GgufFile::get_ints(const std::string& key) const {
  DUET_FIND_OR_FAIL(v, key);
  if (v->type != GgufType::ARRAY || !is_integer_type(v->elem_type))
    return wrong_type(path(), key, *v, "an array of integers");
  std::vector<int32_t> out;
  out.reserve(v->items.size());
  for (size_t i = 0; i < v->items.size(); ++i) {
    const GgufValue& item = v->items[i];
    const bool fits = item.is_signed()
                          ? item.i64 >= std::numeric_limits<int32_t>::min() &&
                                item.i64 <= std::numeric_limits<int32_t>::max()
                          : item.u64 <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
    if (!fits)
      return err(path(), ": key '", key, "' item ", i, " does not fit in a 32-bit integer");
    out.push_back(static_cast<int32_t>(item.is_signed() ? item.i64 : static_cast<int64_t>(item.u64)));
  }
  return out;
}

Result<uint64_t> GgufFile::get_uint_or(const std::string& key, uint64_t fallback) const {
  if (!has(key)) return fallback;
  return get_uint(key);
}

Result<double> GgufFile::get_float_or(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  return get_float(key);
}

#undef DUET_FIND_OR_FAIL

}  // namespace duet
